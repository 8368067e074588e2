#!/bin/sh
# The driver cost table: vramshim-drivercost over the simulated driver
# writes a table in data/driver-costs.csv's layout that the replay reads;
# the shipped table is read; a malformed one is refused with file:line.
# usage: costs_test.sh DRIVERCOST VRAMSHIM_TOOL SHIPPED_TABLE
set -u
dc=$1 tool=$2 shipped=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
export VRAMSIM_STATE="$tmp/sim-state" VRAMSIM_CARDS=8GiB
"$dc" --reps 3 --max 64 --source "sim test" -o "$tmp/costs.csv" 2>"$tmp/err" || { echo "FAIL: drivercost exit $?"; cat "$tmp/err"; failed=1; }
for call in cuMemAlloc cuMemFree cuMemAddressReserve cuMemAddressFree cuMemCreate cuMemMap cuMemSetAccess cuMemUnmap cuMemRelease cuCtxSynchronize cuEventRecord cuEventQuery cuStreamWaitEvent; do
  grep -q "^$call,[0-9]*,[0-9]*,sim test$" "$tmp/costs.csv" || { echo "FAIL: no row for $call"; failed=1; }
done
printf 'Thread,Time,Action,Pointer,Size,Stream\n0,00:00:00.000000,allocate,0x1000,104857600,0x0\n0,00:00:01.500000,free,0x1000,104857600,0x0\n' >"$tmp/t.csv"
for table in "$tmp/costs.csv" "$shipped"; do
  "$tool" replay -q --no-search --costs "$table" --json --policy off "$tmp/t.csv" >"$tmp/out" 2>"$tmp/err" ||
    { echo "FAIL: replay --costs $table"; cat "$tmp/err"; failed=1; }
  grep -q '"modeled_driver_ms":' "$tmp/out" || { echo "FAIL: no modeled_driver_ms with $table"; cat "$tmp/out"; failed=1; }
  grep -q '"cuMemAlloc":1,"cuMemFree":1' "$tmp/out" || { echo "FAIL: calls by kind with $table"; cat "$tmp/out"; failed=1; }
done
# off makes one cuMemAlloc and one cuMemFree of 100 MiB: the modeled time is
# exactly their two costs from the table (interpolated in log2(size)).
printf 'call,size_bytes,ns,source\n' >"$tmp/flat.csv"
for call in cuMemAlloc cuMemFree cuMemAddressReserve cuMemAddressFree cuMemCreate cuMemMap cuMemSetAccess cuMemUnmap cuMemRelease cuCtxSynchronize cuEventRecord cuEventQuery cuStreamWaitEvent; do
  printf '%s,1048576,1000000,t\n%s,1073741824,3000000,t\n' "$call" "$call" >>"$tmp/flat.csv"
done
"$tool" replay -q --no-search --costs "$tmp/flat.csv" --json --policy off "$tmp/t.csv" >"$tmp/out" 2>&1
# 100 MiB = 2^(20+6.64): 1 ms + 2 ms * 6.64/10 = 2.329 ms per call, two calls
grep -q '"modeled_driver_ms":4.65[0-9]' "$tmp/out" || { echo "FAIL: interpolated cost"; cat "$tmp/out"; failed=1; }
printf 'call,size_bytes,ns,source\ncuMemAlloc,12,x,t\n' >"$tmp/bad.csv"
"$tool" replay -q --no-search --costs "$tmp/bad.csv" "$tmp/t.csv" >"$tmp/out" 2>"$tmp/err"
[ $? = 2 ] && grep -qF "vramshim: $tmp/bad.csv:2: bad ns" "$tmp/err" || { echo "FAIL: bad table accepted"; cat "$tmp/err"; failed=1; }
printf 'call,size_bytes,ns,source\ncuMemAlloc,12,5,t\n' >"$tmp/short.csv"
"$tool" replay -q --no-search --costs "$tmp/short.csv" "$tmp/t.csv" >"$tmp/out" 2>"$tmp/err"
[ $? = 2 ] && grep -qF "no cost for cuMemFree" "$tmp/err" || { echo "FAIL: incomplete table accepted"; cat "$tmp/err"; failed=1; }
[ $failed = 0 ] && echo "costs_test: ok"
exit $failed
