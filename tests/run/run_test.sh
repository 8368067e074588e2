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
# A program that starts but never meets the shim: a warning, then it runs
# as asked (the shim here is the real one: a dynamic program gets no warning).
warned() { grep -q "^vramshim: run: warning: $1.*; it runs without vramshim" <<<"$2"; }
err=$(VRAMSHIM_LIBRARY="$shim_real" "$tool" run -- true 2>&1)
check "no warning for a dynamically linked program" test -z "$err"
printf 'int main(void) { return 7; }\n' >"$tmp/st.c"
if cc -static -o "$tmp/st" "$tmp/st.c" 2>/dev/null; then
  err=$(cd "$tmp" && PATH="$tmp:$PATH" VRAMSHIM_LIBRARY="$shim_real" "$tool" run -- st 2>&1)
  st=$?
  check "a static program (found in PATH): warned" warned "$tmp/st is statically linked: no dynamic loader" "$err"
  check "  and run as asked (7)" test $st = 7
else
  echo "vramshim-test: no static C library here: the static case skipped"
fi
# A 32-bit ELF (a header and one PT_INTERP program header: it cannot run here)
python3 -c "
import struct, sys
eh = b'\x7fELF' + bytes([1, 1, 1]) + bytes(9) + struct.pack('<HHIIIIIHHHHHH', 2, 3, 1, 0, 52, 0, 0, 52, 32, 1, 0, 0, 0)
ph = struct.pack('<IIIIIIII', 3, 0, 0, 0, 0, 0, 4, 1)
open(sys.argv[1], 'wb').write(eh + ph)" "$tmp/elf32"
chmod +x "$tmp/elf32"
err=$(VRAMSHIM_LIBRARY="$shim_real" "$tool" run -- "$tmp/elf32" 2>&1)
check "a 32-bit program: warned" warned "$tmp/elf32 is a 32-bit program" "$err"
nosuid=$(findmnt -no OPTIONS -T "$tmp" 2>/dev/null | grep -c nosuid)
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1 && [ "$nosuid" = 0 ]; then
  cp "$(type -P true)" "$tmp/sutrue" && chown nobody "$tmp/sutrue" && chmod u+s "$tmp/sutrue"
  err=$(VRAMSHIM_LIBRARY="$shim_real" "$tool" run -- "$tmp/sutrue" 2>&1)
  st=$?
  check "a set-user-ID program of another user: warned" \
    warned "$tmp/sutrue is set-user-ID: the loader runs it in secure" "$err"
  check "  and run as asked (0)" test $st = 0
else
  echo "vramshim-test: not root (or $tmp is nosuid): the set-user-ID case skipped"
fi
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
