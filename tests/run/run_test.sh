#!/usr/bin/env bash
# `vramshim run` (tools/vramshim/run.c): what it sets, what it returns.
#   run_test.sh VRAMSHIM_TOOL SHIM_PATH
set -uo pipefail
tool=$1 shim=$2
fails=0
check() { # check WHAT COND...
  local what=$1; shift
  if "$@"; then echo "vramshim-test: ok $what"; else echo "vramshim-test: FAIL $what"; fails=$((fails + 1)); fi
}
unset VRAMSHIM_LIBRARY VRAMSHIM_TENANT VRAMSHIM_CONFIG
shim_real=$shim
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
printf '[tenant llm]\nlimit = 1GiB\n' >"$tmp/v.conf"

# The environment the program gets (the probe, env, does not use CUDA).
out=$(cd "$tmp" && LD_PRELOAD=libm.so.6 "$tool" run --tenant llm --config v.conf -- env)
check "LD_PRELOAD = the build tree's shim first, the old entries after" \
  grep -qx "LD_PRELOAD=$shim_real:libm.so.6" <<<"$out"
check "VRAMSHIM_TENANT from --tenant" grep -qx "VRAMSHIM_TENANT=llm" <<<"$out"
check "VRAMSHIM_CONFIG from --config, absolute" grep -qx "VRAMSHIM_CONFIG=$tmp/v.conf" <<<"$out"
out=$(LD_PRELOAD="$shim_real" "$tool" run --tenant=x env)
check "the shim once, options with '=' and without '--'" grep -qx "LD_PRELOAD=$shim_real" <<<"$out"
out=$(VRAMSHIM_LIBRARY=libm.so.6 "$tool" run -- env)
check "VRAMSHIM_LIBRARY overrides the shim" grep -qx "LD_PRELOAD=libm.so.6" <<<"$out"

# Exit status: the program's; 127 and a message when it cannot be started.
VRAMSHIM_LIBRARY=libm.so.6 "$tool" run -- sh -c 'exit 42'
check "the program's exit status (42)" test $? = 42
VRAMSHIM_LIBRARY=libm.so.6 "$tool" run -- sh -c 'kill -TERM $$'
check "a signal stays the program's (143)" test $? = 143
err=$(VRAMSHIM_LIBRARY=libm.so.6 "$tool" run -- /nonexistent/prog 2>&1)
st=$?
check "127 for a program that does not exist" test $st = 127
check "  with a message naming it" grep -q "^vramshim: run: cannot run '/nonexistent/prog': No such file" <<<"$err"
VRAMSHIM_LIBRARY=libm.so.6 "$tool" run -- "$tmp/v.conf" 2>/dev/null
check "127 for a file that is not executable" test $? = 127
err=$("$tool" run --config "$tmp/missing.conf" -- true 2>&1)
check "78 for a missing --config file" test $? = 78
check "  with a message naming it" grep -q "^vramshim: run: cannot use the config file $tmp/missing.conf" <<<"$err"
"$tool" run 2>/dev/null
check "2 without a program" test $? = 2
"$tool" run --bogus true 2>/dev/null
check "2 for an unknown option" test $? = 2
out=$("$tool" run --help)
check "--help" grep -q "usage: vramshim run" <<<"$out"
[ $fails = 0 ]
