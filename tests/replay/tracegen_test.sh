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
[ $failed = 0 ] && echo "tracegen_test: ok"
exit $failed
