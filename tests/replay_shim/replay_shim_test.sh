#!/bin/sh
# `vramshim replay` through the real shim over the sim (policies shim-*).
# usage: replay_shim_test.sh generated|release|real|errors|async VRAMSHIM_TOOL TRACES_DIR
#   generated  a random trace made here: shim-off sees the trace's peak live
#              and makes one driver call per request, exactly as the
#              simulated `off`; shim-vmm and shim-chunks see the same peak
#              with fewer driver calls, lose no byte, and hold at their
#              peak what the simulated vmm and chunks hold
#   real       the same on a real 51 GiB trace (skipped without the traces);
#              the child's memory stays small (the sim's memory is sparse)
#   errors     a missing shim, sim or child, a card too small
#   release    the generated trace with a small release_threshold and
#              --decay 0ms, five times: the shim's run gets the same
#              settings (release_decay in its config) and gives back what
#              the simulated policy does, run after run (the background
#              thread's first look at a new arena only records)
#   async      a two-stream trace made here, the child on cuMemAllocAsync /
#              cuMemFreeAsync (shim-*-async): the shim serves it as the
#              simulated -async policies model it (the same peak reserved
#              and share served from cache in VMM mode, the same calls of
#              every kind but for the shim's own start-up calls)
set -u
mode=$1 tool=$2
traces=${VRAMSHIM_TRACES_DIR:-$3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() {   # check TRACE --no-search|--resolution=R: every shim policy against the simulated `off`
  "$tool" replay --json --quiet $2 --policy off,vmm,chunks,shim-off,shim-vmm,shim-chunks "$1" >"$tmp/json" 2>"$tmp/err" ||
    { echo "FAIL: replay exit status $?:"; cat "$tmp/err"; return 1; }
  cat "$tmp/json"
  python3 - "$tmp/json" "$1" "$2" <<'PY'
import json, sys
rows = {o["policy"]: o for o in map(json.loads, open(sys.argv[1]).read().splitlines())}
assert sorted(rows) == sorted(["off", "vmm", "chunks", "shim-off", "shim-vmm", "shim-chunks"]), rows.keys()
# The trace's own peak of live bytes, summed here from the CSV.
live = peak = 0
sizes = {}
for line in open(sys.argv[2]).read().splitlines()[1:]:
    f = line.split(",")
    if f[2] == "allocate":
        live += int(f[4]); peak = max(peak, live)
    elif f[2] == "free":
        live -= int(f[4])
off, soff = rows["off"], rows["shim-off"]
search = sys.argv[3] != "--no-search"
assert off["peak_live"] == peak, (off["peak_live"], peak)
for p in ("shim-off", "shim-vmm", "shim-chunks"):
    r = rows[p]
    assert r["peak_live"] == peak, (p, r["peak_live"], peak)      # the shim saw every byte
    assert r["requests"] == off["requests"] and r["frees"] == off["frees"], (p, r)
    if search:   # a card below the trace's peak cannot hold it; at the peak reserved it must
        assert peak <= r["smallest_card"] <= r["peak_reserved"] + (1 << 20), (p, r)
    else:
        assert r["smallest_card"] == 0, r
    assert r["peak_reserved"] >= peak, r
    assert r["card"] >= 2 * peak and r["card"] % (1 << 30) == 0, r
    assert r["child_max_rss"] < 256 << 20, (p, "child used", r["child_max_rss"] >> 20, "MiB")
    assert 0 <= r["served_from_cache"] <= 1, r
# arena = off: one driver call per request, nothing kept: the simulated policy exactly
assert soff["driver_calls"] == off["driver_calls"] == off["requests"] + off["frees"], (soff, off)
assert soff["peak_reserved"] == off["peak_reserved"] == peak, (soff, off)
assert soff["served_from_cache"] == 0, soff
if search:   # the sim charges cuMemAlloc in 512 B units; the simulated `off` does not
    assert off["smallest_card"] <= soff["smallest_card"] <= off["smallest_card"] + (2 << 20), (off, soff)
# the arena through the shim: fewer driver calls, most requests from cache,
# and the memory the simulated policy holds, run after run: where the sim's
# cuMemAlloc puts a chunk (the host's mmap) must not change what the arena holds
for p in ("shim-vmm", "shim-chunks"):
    r = rows[p]
    assert r["peak_reserved"] == rows[p[5:]]["peak_reserved"], (p, r["peak_reserved"], rows[p[5:]]["peak_reserved"])
    assert r["driver_calls"] < soff["driver_calls"], (p, r["driver_calls"], soff["driver_calls"])
    assert r["served_from_cache"] > 0.5, r
    assert r["release_threshold"] == 1 << 30, r
print(f"vramshim-test: {sys.argv[2].rsplit('/', 1)[-1]}: peak live {peak} bytes seen by every shim policy; "
      f"driver calls off {soff['driver_calls']}, vmm {rows['shim-vmm']['driver_calls']}, "
      f"chunks {rows['shim-chunks']['driver_calls']}; smallest card " +
      ", ".join(f"{p} {rows[p]['smallest_card']}" for p in ("off", "vmm", "shim-off", "shim-vmm", "shim-chunks")))
PY
}

# expect STATUS STDERR_SUBSTRING ARGS...
expect() {
  want=$1 msg=$2
  shift 2
  "$tool" replay --quiet --no-search "$@" >"$tmp/out" 2>"$tmp/err"
  got=$?
  if [ "$got" != "$want" ] || ! grep -qF -- "$msg" "$tmp/err"; then
    echo "FAIL: replay $*: exit $got (want $want), stderr:"; cat "$tmp/err"
    echo "  wanted on stderr: $msg"
    return 1
  fi
}

# A stationary random workload: 3000 allocations from 512 B to 64 MiB,
# each freed after a random number of later allocations (some never).
gen() {
  python3 - "$1" <<'PY'
import random, sys
rng = random.Random(7)
out = ["Thread,Time,Action,Pointer,Size,Stream"]
live, ptr, t = [], 0x7f0000000000, 0
def ev(action, p, size):
    global t
    t += 1
    out.append(f"0,00:00:{t // 1000000:02d}.{t % 1000000:06d},{action},{hex(p)},{size},0x0")
for i in range(3000):
    size = int(2 ** rng.uniform(9, 26)) // 8 * 8 or 8
    ptr += 1 << 27
    ev("allocate", ptr, size)
    live.append((ptr, size, i + rng.randint(1, 200)))
    for p in [x for x in live if x[2] <= i]:
        ev("free", p[0], p[1])
        live.remove(p)
open(sys.argv[1], "w").write("\n".join(out) + "\n")
PY
}

# The same workload with every tenth allocation on a stream of the
# program's own (freed there), the rest on the legacy stream.
gen2() {
  python3 - "$1" <<'PY'
import random, sys
rng = random.Random(8)
out = ["Thread,Time,Action,Pointer,Size,Stream"]
live, ptr, t = [], 0x7f0000000000, 0
def ev(action, p, size, st):
    global t
    t += 1
    out.append(f"0,00:00:{t // 1000000:02d}.{t % 1000000:06d},{action},{hex(p)},{size},{st}")
for i in range(3000):
    size = int(2 ** rng.uniform(9, 26)) // 8 * 8 or 8
    st = "0x7f5a00001000" if rng.random() < 0.1 else "0x0"
    ptr += 1 << 27
    ev("allocate", ptr, size, st)
    live.append((ptr, size, i + rng.randint(1, 200), st))
    for p in [x for x in live if x[2] <= i]:
        ev("free", p[0], p[1], p[3])
        live.remove(p)
open(sys.argv[1], "w").write("\n".join(out) + "\n")
PY
}

case $mode in
async)
  gen2 "$tmp/two.csv" || exit 1
  "$tool" replay --json --quiet --no-search --policy vmm-async,shim-vmm,shim-vmm-async,shim-chunks-async "$tmp/two.csv" \
    >"$tmp/json" 2>"$tmp/err" || { echo "FAIL: replay exit status $?:"; cat "$tmp/err"; exit 1; }
  cat "$tmp/json"
  python3 - "$tmp/json" <<'PY'
import json, sys
rows = {o["policy"]: o for o in map(json.loads, open(sys.argv[1]).read().splitlines())}
model, plain, vmm, chunks = rows["vmm-async"], rows["shim-vmm"], rows["shim-vmm-async"], rows["shim-chunks-async"]
for r in (vmm, chunks):
    assert r["peak_live"] == model["peak_live"] and r["requests"] == model["requests"], (r, model)
# The model and the shim make the same arena decisions in VMM mode (one
# reserved range: placement does not depend on where the sim maps it; in
# chunks mode it does, so only the bytes are checked there). The shim
# counts every call of every kind (a map is cuMemMap + cuMemSetAccess),
# plus its own start-up calls.
every = sum(v if isinstance(v, int) else v["count"] for v in model["calls"].values())
assert vmm["peak_reserved"] == model["peak_reserved"], (vmm["peak_reserved"], model["peak_reserved"])
assert vmm["served_from_cache"] == model["served_from_cache"], (vmm["served_from_cache"], model["served_from_cache"])
assert every <= vmm["driver_calls"] <= every + 8, (vmm["driver_calls"], every)
print(f"vramshim-test: two streams: calls of every kind vmm-async {every}, shim-vmm-async {vmm['driver_calls']} "
      f"(shim-vmm on cuMemAlloc {plain['driver_calls']}, shim-chunks-async {chunks['driver_calls']}); peak reserved "
      f"{vmm['peak_reserved']} both")
PY
  ;;
generated)
  gen "$tmp/gen.csv" && check "$tmp/gen.csv" --resolution=1MiB ;;
release)
  gen "$tmp/gen.csv" || exit 1
  for run in 1 2 3 4 5; do
    "$tool" replay --json --quiet --no-search --release-threshold 64MiB --decay 0ms \
      --policy chunks,shim-chunks,vmm,shim-vmm "$tmp/gen.csv" >"$tmp/json" 2>"$tmp/err" ||
      { echo "FAIL: replay exit status $?:"; cat "$tmp/err"; exit 1; }
    python3 - "$tmp/json" "$run" <<'PY' || { cat "$tmp/json"; exit 1; }
import json, sys
rows = {o["policy"]: o for o in map(json.loads, open(sys.argv[1]).read().splitlines())}
chunks, vmm = rows["chunks"], rows["vmm"]
# The settings reach the shim: without release_decay = 0ms in its config it
# keeps what decay's default window keeps (27 calls here, not 121).
assert rows["shim-chunks"]["driver_calls"] == chunks["driver_calls"], (rows["shim-chunks"], chunks)
for p in ("chunks", "vmm"):
    r, m = rows["shim-" + p], rows[p]
    assert r["peak_reserved"] == m["peak_reserved"], (p, r["peak_reserved"], m["peak_reserved"])
    assert r["release_threshold"] == 64 << 20, r
# shim-vmm: one cuMemSetAccess per mapping besides the model's calls
assert vmm["driver_calls"] < rows["shim-vmm"]["driver_calls"] <= 2 * vmm["driver_calls"], (rows["shim-vmm"], vmm)
print(f"vramshim-test: release run {sys.argv[2]}: chunks {chunks['driver_calls']} calls / {chunks['peak_reserved']} B "
      f"both; vmm {vmm['peak_reserved']} B both ({vmm['driver_calls']} / {rows['shim-vmm']['driver_calls']} calls)")
PY
  done ;;
real)
  [ -r "$traces/cs336-ctx128-fullstep.csv" ] || { echo "vramshim-test: no traces in $traces: skipped"; exit 77; }
  check "$traces/cs336-ctx128-fullstep.csv" --no-search ;;
errors)
  gen "$tmp/gen.csv" || exit 1
  rc=0
  expect 1 "vramshim: gen.csv, policy shim-off: libvramshim.so not found at $tmp/none.so (as given; give --shim PATH)" \
    --policy shim-off --shim "$tmp/none.so" "$tmp/gen.csv" || rc=1
  expect 1 "the simulated driver's folder not found at $tmp/nosim" \
    --policy shim-vmm --sim-dir "$tmp/nosim" "$tmp/gen.csv" || rc=1
  mkdir "$tmp/emptysim"
  expect 1 "has no libcuda.so.1" --policy shim-vmm --sim-dir "$tmp/emptysim" "$tmp/gen.csv" || rc=1
  expect 1 "vramshim-replay-child not found at $tmp/nochild" --policy shim-chunks --child "$tmp/nochild" "$tmp/gen.csv" || rc=1
  expect 1 "allocations refused on a card of 64.00 MiB (--card sets it)" --policy shim-off --card 64MiB "$tmp/gen.csv" || rc=1
  expect 2 "vramshim: bad --card 'lots'" --policy shim-off --card lots "$tmp/gen.csv" || rc=1
  # the other policies still run and print
  grep -q "^gen.csv *shim-off" "$tmp/out" && { echo "FAIL: a failed policy printed a row"; rc=1; }
  [ $rc = 0 ] && echo "vramshim-test: errors: all messages as expected"
  exit $rc ;;
*)
  echo "usage: replay_shim_test.sh generated|release|real|errors|async TOOL TRACES_DIR"; exit 2 ;;
esac
