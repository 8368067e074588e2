#!/bin/sh
# `vramshim replay` from the command line: usage errors, a malformed trace,
# the table, and --json lines that parse and carry every documented key.
# usage: cli_test.sh VRAMSHIM_TOOL TRACES_DIR   ($VRAMSHIM_TRACES_DIR overrides)
set -u
tool=$1
traces=${VRAMSHIM_TRACES_DIR:-$2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0

# expect STATUS STDERR_SUBSTRING ARGS...: exit status and a line of stderr.
expect() {
  want=$1 msg=$2
  shift 2
  "$tool" replay "$@" >"$tmp/out" 2>"$tmp/err"
  got=$?
  if [ "$got" != "$want" ] || ! grep -qF -- "$msg" "$tmp/err"; then
    echo "FAIL: replay $*: exit $got (want $want), stderr:"; cat "$tmp/err"
    echo "  wanted on stderr: $msg"
    failed=1
  fi
}

"$tool" replay --help >"$tmp/help" || { echo "FAIL: --help exit status"; failed=1; }
for word in --policy --json --release-threshold --resolution --no-search --quiet off chunks vmm pytorch steady; do
  grep -qF -- "$word" "$tmp/help" || { echo "FAIL: --help does not mention $word"; failed=1; }
done

expect 2 "vramshim: cannot open trace $tmp/none.csv: No such file or directory" "$tmp/none.csv"
expect 2 "vramshim: unknown policy 'foo' (known: off, chunks, vmm, pytorch)" --policy off,foo "$traces/cs336-ctx128-forward.csv"
expect 2 "vramshim: unknown option '--bogus'" --bogus "$traces/cs336-ctx128-forward.csv"
expect 2 "vramshim: replay needs at least one trace file" --json
expect 2 "vramshim: bad --release-threshold '12 parsecs'" --release-threshold "12 parsecs" "$traces/cs336-ctx128-forward.csv"
expect 2 "vramshim: --policy needs a value" --policy
printf 'Thread,Time,Action,Pointer,Size,Stream\n0,00:00:00.000000,free,0x10,100,0x0\n' >"$tmp/bad.csv"
expect 1 "vramshim: $tmp/bad.csv:2: free of 0x10, which is not live (never allocated, or already freed)" "$tmp/bad.csv"

# JSON: one object per (trace, policy), in order, with every key.
"$tool" replay --json --quiet --policy off,pytorch --release-threshold=512MiB \
  "$traces/cs336-ctx128-forward.csv" "$traces/cs336-ctx512-forward-mixed.csv" >"$tmp/json" 2>"$tmp/err" ||
  { echo "FAIL: --json run:"; cat "$tmp/err"; failed=1; }
[ -s "$tmp/err" ] && { echo "FAIL: --quiet printed on stderr:"; cat "$tmp/err"; failed=1; }
python3 - "$tmp/json" <<'PY' || failed=1
import json, sys
keys = ["trace", "policy", "requests", "frees", "peak_live", "peak_reserved", "reserved_over_live",
        "smallest_card", "card_over_live", "served_from_cache", "steady_requests", "served_from_cache_steady",
        "driver_calls", "ns_per_request"]
lines = open(sys.argv[1]).read().splitlines()
objs = [json.loads(l) for l in lines]
assert len(objs) == 4, f"{len(objs)} lines, want 4"
assert [o["policy"] for o in objs] == ["off", "pytorch"] * 2, [o["policy"] for o in objs]
assert objs[0]["trace"].endswith("cs336-ctx128-forward.csv") and objs[3]["trace"].endswith("forward-mixed.csv")
for o in objs:
    missing = [k for k in keys if k not in o]
    assert not missing, f"missing keys {missing} in {o}"
    assert 0 <= o["served_from_cache"] <= 1 and 0 <= o["served_from_cache_steady"] <= 1
    assert 0 < o["steady_requests"] < o["requests"]
    assert o["peak_live"] <= o["peak_reserved"] <= o["smallest_card"] or o["policy"] == "pytorch"
    assert o["peak_live"] <= o["smallest_card"] <= o["peak_reserved"] + (1 << 20)
off = objs[0]
assert off["served_from_cache"] == 0 and off["served_from_cache_steady"] == 0 and off["driver_calls"] == off["requests"] + off["frees"], off
print("json ok:", len(objs), "objects")
PY

# The table: a header and one row per (trace, policy).
"$tool" replay --quiet --no-search --policy pytorch "$traces/cs336-ctx128-forward.csv" >"$tmp/table" 2>"$tmp/err"
grep -q "peak reserved" "$tmp/table" && grep -q "^cs336-ctx128-forward.csv *pytorch .*18.32 GiB" "$tmp/table" ||
  { echo "FAIL: table:"; cat "$tmp/table" "$tmp/err"; failed=1; }

[ $failed = 0 ] && echo "replay cli: all checks passed"
exit $failed
