#!/bin/sh
# Instructions per call of the hooks vramshim-bench exercises, counted by
# callgrind on the null driver (deterministic, unlike ns on a shared
# machine). Each build runs twice, with N and 2N calls per measurement; a
# hook's instructions per call are the difference of its inclusive cost
# over the difference of its calls, so one-time costs (the first
# allocation makes the arena) cancel out.
#   tools/bench/shim/callgrind-hooks.sh [--size S [--arena MODE]] BUILD_DIR [BUILD_DIR...]
# Prints one line per build and exported entry point:
# "BUILD ENTRY INSTRUCTIONS/CALL". Two build folders side by side compare
# an old commit with this one (`git worktree add /tmp/old COMMIT`, then
# build its vramshim, vramshim-bench and vs_null_driver into /tmp/old/build).
# --size S: one path of the arena alone (`vramshim-bench --arena-child
# --size S`: 512, 4096, 307200 or 4194304 bytes, so the slabs' or the
# heap's; the bench refuses others, and its message is shown), in the arena mode MODE (vmm, chunks or off; default vmm); adds a
# line "BUILD pair N", the alloc + free pair. That mode drives every build's
# library with the last BUILD_DIR's vramshim-bench and null driver (older
# benches lack --size), so only the library differs.
set -eu
size=
mode=vmm
while [ $# -gt 0 ]; do
  case "$1" in
    --size) size=$2; shift 2 ;;
    --arena) mode=$2; shift 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: $0 [--size S [--arena MODE]] BUILD_DIR [BUILD_DIR...]" >&2; exit 2; }
case "$mode" in
  vmm | chunks | off) ;;
  *) echo "$0: --arena takes vmm, chunks or off" >&2; exit 2 ;;
esac
for last in "$@"; do :; done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# entry point, calls, inclusive instructions: from the caller tree, where a
# block of "<" lines (callers, with call counts) ends in one "*" line (the
# function, inclusive cost); the exported entry points live in hooks.c
# (since the concern folders, the debug info names their first line in
# entry/init.h: vs_start, inlined). The calls are counted, not assumed:
# a run makes warm-up pairs besides its measured ones.
costs() {
  # A config of its own: the defaults, a ledger folder per run (builds of
  # other commits may lay the ledger out differently).
  rm -rf "$out/ledger"
  printf '[global]\nledger_dir = %s/ledger\n' "$out" > "$out/conf"
  if [ -n "$size" ]; then
    printf 'arena = %s\n' "$mode" >> "$out/conf"
    set -- "$1" "$2" --arena-child --threads 1 --size "$size"
  fi
  build=$1 calls=$2
  shift 2
  harness=$build
  [ -z "$size" ] || harness=$last
  VRAMSHIM_CONFIG="$out/conf" valgrind -q --tool=callgrind --callgrind-out-file="$out/cg" \
    "$harness/tools/bench/shim/vramshim-bench" --driver "$harness/tools/bench/shim/libvs_null_driver.so" \
    --shim "$build/src/libvramshim.so" --runs 3 --calls "$calls" "$@" > /dev/null 2> "$out/err" || {
    echo "$0: vramshim-bench failed under valgrind for $build:" >&2
    tail -5 "$out/err" >&2
    exit 1
  }
  callgrind_annotate --inclusive=yes --tree=caller "$out/cg" 2>/dev/null | awk '
    /^ *$/ { n = 0; next }
    / < / && match($0, /\(([0-9,]+)x\)/) { c = substr($0, RSTART + 1, RLENGTH - 3); gsub(",", "", c); n += c; next }
    / \* .*(hooks\.c|init\.h):cu[A-Za-z_0-9]+/ && match($0, /(hooks\.c|init\.h):cu[A-Za-z_0-9]+/) {
      f = substr($0, RSTART, RLENGTH); sub(/^[^:]*:/, "", f)
      c = $1; gsub(",", "", c)
      if (n) print f, n, c
      n = 0
    }'
}

for b in "$@"; do
  costs "$b" 2000 > "$out/a"
  costs "$b" 4000 > "$out/b"
  awk -v b="$b" -v size="$size" 'NR == FNR { n[$1] = $2; c[$1] = $3; next }
    ($1 in n) && $2 > n[$1] && $1 ~ /^(cuMemGetInfo_v2|cuMemAlloc_v2|cuMemFree_v2|cuPointerGetAttribute|cuGetProcAddress_v2)$/ {
      v = ($3 - c[$1]) / ($2 - n[$1])
      printf "%s %-24s %10.1f\n", b, $1, v
      if ($1 ~ /^cuMem(Alloc|Free)_v2$/) pair += v
    }
    END { if (size != "") printf "%s %-24s %10.1f\n", b, "pair", pair }' "$out/a" "$out/b" | sort -k2
done
