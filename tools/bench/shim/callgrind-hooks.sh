#!/bin/sh
# Instructions per call of the hooks vramshim-bench exercises, counted by
# callgrind on the null driver (deterministic, unlike ns on a shared
# machine). Each build runs twice, with N and 2N calls per measurement; a
# hook's instructions per call are the difference of its inclusive cost
# over the difference of its calls, so one-time costs (the first
# allocation makes the arena) cancel out.
#   tools/bench/shim/callgrind-hooks.sh BUILD_DIR [BUILD_DIR...]
# Prints one line per build and exported entry point:
# "BUILD ENTRY INSTRUCTIONS/CALL". Two build folders side by side compare
# an old commit with this one (`git worktree add /tmp/old COMMIT`, then
# build its vramshim, vramshim-bench and vs_null_driver into /tmp/old/build).
set -eu
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# entry point, calls, inclusive instructions: from the caller tree, where a
# block of "<" lines (callers, with call counts) ends in one "*" line (the
# function, inclusive cost); the exported entry points live in hooks.c
# (since the concern folders, the debug info names their first line in
# entry/init.h: vs_start, inlined).
costs() {
  # A config of its own: the defaults, a ledger folder per run (builds of
  # other commits may lay the ledger out differently).
  rm -rf "$out/ledger"
  printf '[global]\nledger_dir = %s/ledger\n' "$out" > "$out/conf"
  VRAMSHIM_CONFIG="$out/conf" valgrind --tool=callgrind --callgrind-out-file="$out/cg" \
    "$1/tools/bench/shim/vramshim-bench" --driver "$1/tools/bench/shim/libvs_null_driver.so" \
    --shim "$1/src/libvramshim.so" --runs 3 --calls "$2" > /dev/null 2>&1
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
  awk -v b="$b" 'NR == FNR { n[$1] = $2; c[$1] = $3; next }
    ($1 in n) && $2 > n[$1] && $1 ~ /^(cuMemGetInfo_v2|cuMemAlloc_v2|cuMemFree_v2|cuPointerGetAttribute|cuGetProcAddress_v2)$/ {
      printf "%s %-24s %10.1f\n", b, $1, ($3 - c[$1]) / ($2 - n[$1])
    }' "$out/a" "$out/b" | sort -k2
done
