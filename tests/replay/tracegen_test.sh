#!/bin/sh
# tools/tracegen: every workload x length x arrival distribution makes a
# trace that `vramshim replay` reads; the same seed makes the same bytes, a
# different seed a different trace; time never runs backwards; a generated
# stream can be piped into the replay ('-').
# usage: tracegen_test.sh TRACEGEN.py VRAMSHIM_TOOL
set -u
gen=$1 tool=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
for wl in paged concat; do
  for len in uniform lognormal zipf bimodal; do
    for arr in poisson bursty diurnal; do
      f="$tmp/$wl-$len-$arr.csv"
      python3 "$gen" --workload $wl --lengths $len --arrival $arr --model tiny --requests 12 --max-batch 4 \
        --output-mean 24 --prompt-mean 32 -o "$f" 2>/dev/null || { echo "FAIL: tracegen $wl $len $arr"; failed=1; continue; }
      "$tool" replay -q --no-search --policy off,vmm,pytorch "$f" >"$tmp/out" 2>&1 ||
        { echo "FAIL: replay of $wl $len $arr"; cat "$tmp/out"; failed=1; }
    done
  done
done
python3 "$gen" --workload concat --model tiny --requests 20 --seed 5 -o "$tmp/a.csv" 2>/dev/null
python3 "$gen" --workload concat --model tiny --requests 20 --seed 5 -o "$tmp/b.csv" 2>/dev/null
python3 "$gen" --workload concat --model tiny --requests 20 --seed 6 -o "$tmp/c.csv" 2>/dev/null
cmp -s "$tmp/a.csv" "$tmp/b.csv" || { echo "FAIL: same seed, different traces"; failed=1; }
cmp -s "$tmp/a.csv" "$tmp/c.csv" && { echo "FAIL: different seeds, same trace"; failed=1; }
# Time column never decreasing; every allocation freed by the end.
python3 - "$tmp/a.csv" <<'PY' || failed=1
import sys
last = ""; live = {}
for i, line in enumerate(open(sys.argv[1])):
    if i == 0: continue
    _, t, act, p, size, _ = line.strip().split(",")
    h, m, s = t.split(":")
    v = (int(h) * 60 + int(m)) * 60 + float(s)
    assert last == "" or v >= last, f"time runs backwards at line {i + 1}"
    last = v
    if act == "allocate": live[p] = size
    else: assert live.pop(p) == size
assert not live, f"{len(live)} allocations never freed"
PY
# concat: a request's caches grow by concatenation (a bigger block
# allocated, then the old one freed), so sizes of one layer's cache increase.
python3 "$gen" --workload concat --model tiny --requests 1 --prompt-mean 8 --output-mean 8 --lengths uniform --seed 3 2>/dev/null |
  "$tool" replay -q --no-search --policy off - >"$tmp/out" 2>&1 || { echo "FAIL: replay from a pipe"; cat "$tmp/out"; failed=1; }
grep -q "<stdin>\|^-" "$tmp/out" || grep -q "off" "$tmp/out" || { echo "FAIL: no row for the piped trace"; failed=1; }
# Stream order (docs/arena.md): a server on the legacy stream alone is
# replayed by the arena policies with no cuCtxSynchronize at all; the same
# server with a copy stream (--copy-stream: its blocks carry another
# Stream, freed on their own stream) is not in stream order, so the arena
# syncs before reusing freed memory. Fails if the replay ignores the
# Stream column either way.
for cs in "" --copy-stream; do
  python3 "$gen" --workload concat --model tiny --requests 40 --max-batch 8 --seed 4 $cs -o "$tmp/s$cs.csv" 2>/dev/null
  "$tool" replay -q --json --no-search --policy vmm,chunks "$tmp/s$cs.csv" >"$tmp/s$cs.json" 2>&1 ||
    { echo "FAIL: replay of the ${cs:-one-stream} server"; cat "$tmp/s$cs.json"; failed=1; }
done
python3 - "$tmp/s.csv" "$tmp/s.json" "$tmp/s--copy-stream.csv" "$tmp/s--copy-stream.json" <<'PY' || failed=1
import json, sys
def syncs(path):
    out = {}
    for line in open(path):
        d = json.loads(line)
        c = d["calls"].get("cuCtxSynchronize", 0)
        out[d["policy"]] = c if isinstance(c, int) else c["count"]
    return out
def streams(path):
    seen, own = set(), {}
    for i, line in enumerate(open(path)):
        if i == 0: continue
        _, _, act, p, _, st = line.strip().split(",")
        seen.add(st)
        if act == "allocate": own[p] = st
        else: assert own.pop(p) == st, f"{path}: a block freed on another stream than its own"
    return seen
one, two = syncs(sys.argv[2]), syncs(sys.argv[4])
assert streams(sys.argv[1]) == {"0x0"}, "the one-stream server uses another stream"
assert len(streams(sys.argv[3])) == 2, "the copy-stream server does not use two streams"
for pol in ("vmm", "chunks"):
    assert one[pol] == 0, f"{pol}: {one[pol]} syncs on a legacy-stream-only trace (stream order ignored)"
    assert two[pol] > 0, f"{pol}: no sync on a two-stream trace (stream safety lost)"
print("stream order: syncs one-stream", one, "copy stream", two)
PY
[ $failed = 0 ] && echo "tracegen_test: ok"
exit $failed
