#!/bin/sh
# tools/tracegen/traingen.py: every option makes a trace that `vramshim
# replay` reads, with every allocation freed by the end (weights and
# optimizer states kept with --no-teardown); the same arguments make the
# same bytes, and with --seq-mix the seed draws the lengths; time never runs
# backwards. Then the churn guard it was written for: a training loop is
# stationary after its first step, so ten times the steps must not mean
# more driver calls (at most 1.2 x, issue 27), in both arena modes (chunks
# released and regrew a logits chunk every step until decay kept the
# reserved high of a window that regretted a release: docs/arena.md).
# usage: traingen_test.sh TRAINGEN.py VRAMSHIM_TOOL
set -u
gen=$1 tool=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
check_trace() {   # FILE [keep]: time order, sizes, and what is left live
  python3 - "$@" <<'PY'
import sys
path, keep = sys.argv[1], len(sys.argv) > 2
last = None; live = {}
for i, line in enumerate(open(path)):
    if i == 0:
        assert line == "Thread,Time,Action,Pointer,Size,Stream\n", line
        continue
    _, t, act, p, size, stream = line.strip().split(",")
    h, m, s = t.split(":")
    v = (int(h) * 60 + int(m)) * 60 + float(s)
    assert last is None or v >= last, f"time runs backwards at line {i + 1}"
    last = v
    assert int(size) > 0 and stream == "0x0"
    if act == "allocate":
        assert p not in live, f"line {i + 1}: {p} allocated twice"
        live[p] = size
    else:
        assert live.pop(p) == size, f"line {i + 1}: free of {p} with another size"
assert bool(live) == keep, f"{len(live)} allocations live at the end"
PY
}
for opts in "" "--attention flash" "--checkpoint" "--mixed" "--seq-mix" "--accum 3" \
            "--attention flash --checkpoint --mixed --seq-mix --accum 2"; do
  f="$tmp/t.csv"
  # shellcheck disable=SC2086
  python3 "$gen" --model tiny --batch 2 --seq 64 --steps 3 $opts -o "$f" 2>/dev/null ||
    { echo "FAIL: traingen $opts"; failed=1; continue; }
  check_trace "$f" || { echo "FAIL: traingen $opts: trace"; failed=1; }
  "$tool" replay -q --no-search --policy off,chunks,vmm,pytorch "$f" >"$tmp/out" 2>&1 ||
    { echo "FAIL: replay of traingen $opts"; cat "$tmp/out"; failed=1; }
  [ -z "$opts" ] || { cmp -s "$f" "$tmp/plain.csv" && { echo "FAIL: traingen $opts: the same trace as without it"; failed=1; }; }
  [ -n "$opts" ] || cp "$f" "$tmp/plain.csv"
done
# A vision model: the loader's images, a classifier on the class token.
if ! { python3 "$gen" --model vit-l --layers 1 --batch 2 --seq 197 --steps 2 -o "$tmp/v.csv" 2>/dev/null &&
       check_trace "$tmp/v.csv" &&
       "$tool" replay -q --no-search --policy chunks,vmm,pytorch "$tmp/v.csv" >"$tmp/out" 2>&1; }; then
  echo "FAIL: traingen --model vit-l"; cat "$tmp/out"; failed=1
fi
python3 "$gen" --model tiny --batch 2 --seq 64 --steps 2 --no-teardown -o "$tmp/k.csv" 2>/dev/null
check_trace "$tmp/k.csv" keep || { echo "FAIL: --no-teardown"; failed=1; }
python3 "$gen" --model tiny --seq-mix --steps 4 --seed 5 -o "$tmp/a.csv" 2>/dev/null
python3 "$gen" --model tiny --seq-mix --steps 4 --seed 5 -o "$tmp/b.csv" 2>/dev/null
python3 "$gen" --model tiny --seq-mix --steps 4 --seed 6 -o "$tmp/c.csv" 2>/dev/null
cmp -s "$tmp/a.csv" "$tmp/b.csv" || { echo "FAIL: same seed, different traces"; failed=1; }
cmp -s "$tmp/a.csv" "$tmp/c.csv" && { echo "FAIL: --seq-mix: different seeds, same trace"; failed=1; }
python3 "$gen" --model tiny --steps 0 >/dev/null 2>&1 && { echo "FAIL: --steps 0 accepted"; failed=1; }

# Churn: ten times the optimizer steps, four configurations. A two-layer
# GPT-2-wide model (fp32, naive attention: 1.5 GiB of logits and their
# gradient per step), 4 and 40 steps; six layers with the length drawn per
# micro-step and 4 micro-steps per step, 3 and 30 steps (vmm moved wholly
# free handles under each step's largest tensors, and the holes they left
# were the next step's: 87 -> 127 calls, until handles moved only at the
# limit: docs/arena.md); and two whose first decay window gave back memory
# the next step grew again (vmm 37 -> 47 and 35 -> 49, until decay kept the
# last growth's reserved level while the use reaches the use it grew at).
churn() {   # NAME STEPS-AT-X1 TRAINGEN-ARGS...
  name=$1 n=$2
  shift 2
  for steps in $n $((n * 10)); do
    python3 "$gen" "$@" --steps "$steps" 2>/dev/null |
      "$tool" replay -q --no-search --json --policy chunks,vmm,pytorch - >"$tmp/$name-$steps.json" ||
      { echo "FAIL: replay of the churn trace $name ($steps steps)"; failed=1; }
  done
  python3 - "$name" "$n" "$tmp/$name-$n.json" "$tmp/$name-$((n * 10)).json" <<'PY' || failed=1
import json, sys
name, n = sys.argv[1], int(sys.argv[2])
calls = [{d["policy"]: d["driver_calls"] for d in map(json.loads, open(p))} for p in sys.argv[3:]]
bad = 0
for pol in ("chunks", "vmm"):
    x1, x10 = calls[0][pol], calls[1][pol]
    print(f"{name} {pol}: {x1} driver calls at {n} steps, {x10} at {10 * n} "
          f"(pytorch {calls[0]['pytorch']}, {calls[1]['pytorch']})")
    if x10 > 1.2 * x1:
        print(f"FAIL: {name}: {pol} churns: {x10} > 1.2 x {x1}")
        bad = 1
sys.exit(bad)
PY
}
churn gpt2-2l 4 --model gpt2 --layers 2 --batch 8 --seq 1024
churn gpt2-6l-seqmix 3 --model gpt2 --layers 6 --batch 4 --seq 2048 --seq-mix --accum 4 --seed 21
churn gpt2-4l-ckpt 4 --model gpt2 --layers 4 --batch 2 --seq 2048 --attention flash --checkpoint --accum 8 --seed 3
churn gpt2-2l-seqmix 4 --model gpt2 --layers 2 --batch 4 --seq 2048 --seq-mix --accum 4 --seed 21
exit $failed
