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
# The serving features (prefix sharing, speculative decoding, several
# models): every combination makes a trace the replay reads, with every
# allocation freed by the end; each feature changes the trace; without them
# the bytes are those of the plain generator (checked by the seed test below
# through the workloads' defaults).
for wl in paged concat; do
  for feat in "--prefix-share 0.7" "--spec-decode 3" "--models 3" "--prefix-share 0.5 --spec-decode 2 --models 2"; do
    f="$tmp/feat.csv"
    # shellcheck disable=SC2086
    python3 "$gen" --workload $wl --model tiny --requests 16 --max-batch 4 --output-mean 24 --prompt-mean 32 $feat \
      -o "$f" 2>/dev/null || { echo "FAIL: tracegen $wl $feat"; failed=1; continue; }
    python3 "$gen" --workload $wl --model tiny --requests 16 --max-batch 4 --output-mean 24 --prompt-mean 32 \
      -o "$tmp/plain.csv" 2>/dev/null
    cmp -s "$f" "$tmp/plain.csv" && { echo "FAIL: $wl $feat: the same trace as without it"; failed=1; }
    "$tool" replay -q --no-search --policy off,chunks,vmm,pytorch "$f" >"$tmp/out" 2>&1 ||
      { echo "FAIL: replay of $wl $feat"; cat "$tmp/out"; failed=1; }
    python3 - "$f" <<'PY' || { echo "FAIL: $wl $feat: allocations left live"; failed=1; }
import sys
live = {}
for i, line in enumerate(open(sys.argv[1])):
    if i == 0: continue
    _, t, act, p, size, _ = line.strip().split(",")
    if act == "allocate": live[p] = size
    else: assert live.pop(p) == size
assert not live, f"{len(live)} allocations never freed"
PY
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
# (--no-syncs: without the sidecar of the program's synchronisations.)
for cs in "" --copy-stream; do
  python3 "$gen" --workload concat --model tiny --requests 40 --max-batch 8 --seed 4 $cs --no-syncs \
    -o "$tmp/s$cs.csv" 2>/dev/null
  [ -e "$tmp/s$cs.csv.syncs" ] && { echo "FAIL: --no-syncs wrote a sidecar"; failed=1; }
  "$tool" replay -q --json --no-search --policy vmm,chunks,vmm-async,chunks-async "$tmp/s$cs.csv" >"$tmp/s$cs.json" 2>&1 ||
    { echo "FAIL: replay of the ${cs:-one-stream} server"; cat "$tmp/s$cs.json"; failed=1; }
done
# The program's own synchronisations (docs/replay.md, TRACE.syncs): the
# copy-stream server with its sidecar (it syncs both streams every step)
# needs fewer syncs of the arena's own, on the same trace bytes; a sidecar
# that syncs only the copy stream, never the legacy one, must change
# nothing (a block is idle only once every stream synced after its free).
python3 "$gen" --workload concat --model tiny --requests 40 --max-batch 8 --seed 4 --copy-stream \
  -o "$tmp/p.csv" 2>/dev/null
cmp -s "$tmp/p.csv" "$tmp/s--copy-stream.csv" || { echo "FAIL: the sidecar changed the trace itself"; failed=1; }
head -1 "$tmp/p.csv.syncs" | grep -qx "After,Sync,Stream" || { echo "FAIL: no sidecar beside the copy-stream trace"; failed=1; }
"$tool" replay -q --json --no-search --policy vmm,chunks,vmm-async,chunks-async "$tmp/p.csv" >"$tmp/p.json" 2>&1 ||
  { echo "FAIL: replay with the sidecar"; cat "$tmp/p.json"; failed=1; }
cp "$tmp/p.csv" "$tmp/q.csv"
grep -v ",0x0$" "$tmp/p.csv.syncs" >"$tmp/q.csv.syncs"
"$tool" replay -q --json --no-search --policy vmm,chunks "$tmp/q.csv" >"$tmp/q.json" 2>&1 ||
  { echo "FAIL: replay with the copy-stream-only sidecar"; cat "$tmp/q.json"; failed=1; }
# A malformed sidecar stops the replay with file:line.
cp "$tmp/p.csv" "$tmp/r.csv"
printf 'After,Sync,Stream\n5,stream,0x0\n3,context,\n' >"$tmp/r.csv.syncs"
"$tool" replay -q --no-search --policy vmm "$tmp/r.csv" >"$tmp/r.out" 2>&1 && { echo "FAIL: a decreasing After was accepted"; failed=1; }
grep -q "r.csv.syncs:3: After 3 is before" "$tmp/r.out" || { echo "FAIL: no file:line for a bad sidecar"; cat "$tmp/r.out"; failed=1; }
python3 - "$tmp/s.csv" "$tmp/s.json" "$tmp/s--copy-stream.csv" "$tmp/s--copy-stream.json" "$tmp/p.json" \
  "$tmp/q.json" <<'PY' || failed=1
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
own, half = syncs(sys.argv[5]), syncs(sys.argv[6])
assert streams(sys.argv[1]) == {"0x0"}, "the one-stream server uses another stream"
assert len(streams(sys.argv[3])) == 2, "the copy-stream server does not use two streams"
for pol in ("vmm", "chunks"):
    assert one[pol] == 0, f"{pol}: {one[pol]} syncs on a legacy-stream-only trace (stream order ignored)"
    assert two[pol] > 0, f"{pol}: no sync on a two-stream trace (stream safety lost)"
    assert own[pol] < two[pol], f"{pol}: the program's syncs saved none of the arena's ({own[pol]} vs {two[pol]})"
    assert half[pol] == two[pol], f"{pol}: syncs of the copy stream alone counted ({half[pol]} vs {two[pol]})"
# The program on the stream-ordered allocator (the -async policies,
# docs/arena.md "The lane"): on the one-stream server exactly the plain
# policies' run; with the copy stream, the legacy stream's blocks are
# reused on the lane with no sync, so the arena syncs only for the copy
# stream's allocations, and none at all where the program's own syncs
# (both streams at the end of each step, before the next step's copy
# allocation) cover them. Fails if the lane is ignored (the plain count),
# or if reuse is taken for safe where it is not (a copy allocation right
# after lane frees without the sidecar must still sync, or order its stream
# after the lane: cuStreamWaitEvent).
def rows(path):
    return {json.loads(l)["policy"]: json.loads(l) for l in open(path)}
r1, r2, rp = rows(sys.argv[2]), rows(sys.argv[4]), rows(sys.argv[5])
for pol in ("vmm", "chunks"):
    for k in ("driver_calls", "peak_reserved", "calls"):
        assert r1[pol + "-async"][k] == r1[pol][k], f"{pol}-async differs from {pol} on a one-stream trace ({k})"
    assert one[pol + "-async"] == 0, f"{pol}-async: syncs on a legacy-stream-only trace"
    assert own[pol + "-async"] == 0, f"{pol}-async: {own[pol + '-async']} syncs with the program's own"
    waits = r2[pol + "-async"]["calls"].get("cuStreamWaitEvent", 0)
    waits = waits if isinstance(waits, int) else waits["count"]
    assert two[pol + "-async"] < two[pol], f"{pol}-async: {two[pol + '-async']} syncs without the sidecar (plain {two[pol]})"
    assert two[pol + "-async"] + waits > 0, f"{pol}-async: neither a sync nor an order without the sidecar"
    assert rp[pol + "-async"]["driver_calls"] < rp[pol]["driver_calls"], f"{pol}-async: no fewer calls"
print("stream order: syncs one-stream", one, "copy stream", two, "with the program's syncs", own,
      "copy stream synced alone", half)
PY
[ $failed = 0 ] && echo "tracegen_test: ok"
exit $failed
