#!/usr/bin/env bash
# HAMi-core's contract (src/tenant/hami_env.h) through the shim over the sim:
# CUDA_DEVICE_MEMORY_LIMIT[_<i>] set each card's limit and view when there is
# no config file; a config file wins, with one line naming the conflict.
#   hami_env_test.sh WORKDIR PRELOAD SIM_DIR LIMIT_VIEW VRAMSHIM_TOOL
set -uo pipefail
# The ledger folder. Without a config file (this test's subject) the shim uses
# the default one, /run/vramshim as root, so no config can name a folder of
# our own, and the machine's real one would keep what each run leaves there
# (and earlier runs' leftovers, or another vramshim version's ledgers in use,
# would decide this run's result). So it must stay the default path, made
# private: as root, in a mount namespace of our own with a fresh tmpfs on
# /run/vramshim (gone when the test ends); as another user, /run/vramshim is
# not writable and the shim falls back to $XDG_RUNTIME_DIR/vramshim, which we
# point into WORKDIR. Where neither holds (root without mount namespaces), the
# real folder is used with one fixed tenant name, so runs share one tenant
# entry instead of taking a new one each.
if [ -z "${VS_HAMI_PRIVATE:-}" ] && [ "$(id -u)" = 0 ] &&
   unshare -m --propagation private true 2>/dev/null; then
  mkdir -p /run/vramshim
  exec unshare -m --propagation private env VS_HAMI_PRIVATE=tmpfs bash -c \
    'mount -t tmpfs -o mode=0755,size=16m vramshim-test /run/vramshim && exec bash "$0" "$@"' "$0" "$@"
fi
work=$1 preload=$2 simdir=$3 view=$4 tool=$5
rm -rf "$work" && mkdir -p "$work"
private=${VS_HAMI_PRIVATE:-}
xdg=()
if [ -z "$private" ] && [ "$(id -u)" != 0 ] && [ ! -w /run/vramshim ]; then
  mkdir -m 0700 "$work/xdg" && xdg=(XDG_RUNTIME_DIR="$work/xdg") && private=xdg
fi
if [ -n "$private" ]; then
  echo "vramshim-test: default ledger folder made private ($private)"
else
  echo "vramshim-test: NOTE: no private ledger folder here (root without mount namespaces): using the real" \
       "/run/vramshim, tenant 'hami-test'"
fi
if [ -e /etc/vramshim.conf ]; then
  echo "vramshim-test: SKIP: /etc/vramshim.conf exists here, so there is never 'no config file'"
  exit 77
fi
GiB=$((1 << 30)) MiB=$((1 << 20))
# Cards of their own: the sim's UUIDs carry the capacity in GiB, so 5 and 6 GiB
# cards share no ledger with the other tests' cards (default ledger_dir: no config).
C0=$((5 * GiB)) C1=$((6 * GiB))
# One tenant name for every run (a pid in it took a new ledger entry per run).
base_env=(env -u LD_PRELOAD -u VRAMSHIM_CONFIG -u VRAMSHIM_ON_ERROR -u CUDA_DEVICE_MEMORY_LIMIT
          -u CUDA_DEVICE_MEMORY_LIMIT_0 -u CUDA_DEVICE_MEMORY_LIMIT_1 "${xdg[@]}"
          LD_LIBRARY_PATH="$simdir" VRAMSIM_STATE="$work/sim.state" VRAMSIM_CARDS=5GiB,6GiB
          VRAMSHIM_TENANT=hami-test)
fails=0
n=0
# run NAME WANT_STATUS [VAR=VALUE...] -- CARD=TOTAL...
run() {
  local name=$1 want=$2
  shift 2
  local vars=()
  while [ "$1" != -- ]; do vars+=("$1"); shift; done
  shift
  n=$((n + 1))
  "${base_env[@]}" LD_PRELOAD="$preload" "${vars[@]}" "$view" "$@" >"$work/$name.out" 2>"$work/$name.err"
  local st=$?
  if [ "$st" != "$want" ]; then
    echo "vramshim-test: FAIL $name: exit $st, expected $want (${vars[*]} -> $*)"
    sed 's/^/    /' "$work/$name.out" "$work/$name.err"
    fails=$((fails + 1))
  else
    echo "vramshim-test: ok $name (${vars[*]}): $(grep -c 'card ' "$work/$name.out") card(s) as expected"
  fi
}

run global 0 CUDA_DEVICE_MEMORY_LIMIT=1g -- 0=$GiB 1=$GiB
run per_card 0 CUDA_DEVICE_MEMORY_LIMIT=1024m CUDA_DEVICE_MEMORY_LIMIT_1=512m -- 0=$GiB 1=$((512 * MiB))
run per_card_only 0 CUDA_DEVICE_MEMORY_LIMIT_1=1048576K -- 0=$C0 1=$GiB
run bytes 0 CUDA_DEVICE_MEMORY_LIMIT=1073741824 -- 0=$GiB 1=$GiB
run zero_falls_back 0 CUDA_DEVICE_MEMORY_LIMIT=768M CUDA_DEVICE_MEMORY_LIMIT_1=0 -- 0=$((768 * MiB)) 1=$((768 * MiB))
run zero_no_limit 0 CUDA_DEVICE_MEMORY_LIMIT=0 -- 0=$C0 1=$C1
run above_card 0 CUDA_DEVICE_MEMORY_LIMIT=64g -- 0=$C0 1=$C1
# A view of exactly 4 GiB: the legacy 32-bit queries saturate, never wrap to 0.
run four_gib 0 CUDA_DEVICE_MEMORY_LIMIT=4g -- 0=$((4 * GiB)) 1=$((4 * GiB))

# A malformed value: the config-error rule (exit 78, the variable named), or
# passthrough without enforcement.
run malformed 78 CUDA_DEVICE_MEMORY_LIMIT=1gb -- 0=$GiB
if ! grep -q '^vramshim: CUDA_DEVICE_MEMORY_LIMIT=1gb: bad size' "$work/malformed.err"; then
  echo "vramshim-test: FAIL malformed: no message naming the variable:"; cat "$work/malformed.err"
  fails=$((fails + 1))
fi
run malformed_pass 0 CUDA_DEVICE_MEMORY_LIMIT_0=-1 VRAMSHIM_ON_ERROR=passthrough -- 0=$C0
grep -q 'WITHOUT quota enforcement' "$work/malformed_pass.err" || {
  echo "vramshim-test: FAIL malformed_pass: no line saying enforcement is off"; fails=$((fails + 1)); }

# A config file wins; one line names the ignored variables and the file.
cat >"$work/vramshim.conf" <<EOF
[global]
ledger_dir = $work/ledger
[tenant hami-test]
limit = 2GiB
EOF
run file_wins 0 VRAMSHIM_CONFIG="$work/vramshim.conf" CUDA_DEVICE_MEMORY_LIMIT=1g CUDA_DEVICE_MEMORY_LIMIT_1=3g -- \
  0=$((2 * GiB)) 1=$((2 * GiB))
lines=$(grep -c "^vramshim: CUDA_DEVICE_MEMORY_LIMIT=1g, CUDA_DEVICE_MEMORY_LIMIT_1=3g ignored: the config file $work/vramshim.conf" \
        "$work/file_wins.err")
if [ "$lines" != 1 ]; then
  echo "vramshim-test: FAIL file_wins: $lines lines name the conflict, expected 1:"; cat "$work/file_wins.err"
  fails=$((fails + 1))
fi

# The same through `vramshim run` (the tool finds the shim; VRAMSHIM_LIBRARY
# names it where an ASan runtime must come first).
n=$((n + 1))
lib_env=()
case "$preload" in *:*) lib_env=(VRAMSHIM_LIBRARY="$preload") ;; esac
"${base_env[@]}" "${lib_env[@]}" CUDA_DEVICE_MEMORY_LIMIT_0=256m \
  "$tool" run -- "$view" 0=$((256 * MiB)) >"$work/run.out" 2>"$work/run.err"
st=$?
if [ $st != 0 ]; then
  echo "vramshim-test: FAIL vramshim run: exit $st"; cat "$work/run.out" "$work/run.err"; fails=$((fails + 1))
else
  echo "vramshim-test: ok vramshim run with CUDA_DEVICE_MEMORY_LIMIT_0=256m"
fi

dflt=/run/vramshim
[ "$private" = xdg ] && dflt=$work/xdg/vramshim
# A tenant per pod, as with HAMi's device plugin: more names, one after
# another, than a card's ledger has tenant entries (64); each process must
# start (entries nothing uses go to new names), and status shows the newest.
# Only in the private folder: the machine's ledgers are not for churning.
if [ -n "$private" ]; then
  n=$((n + 1))
  pods=70 bad=0
  for i in $(seq 1 $pods); do
    "${base_env[@]}" LD_PRELOAD="$preload" VRAMSHIM_TENANT="pod-$i" CUDA_DEVICE_MEMORY_LIMIT=1g "$view" 0=$GiB \
      >"$work/pod.out" 2>"$work/pod.err" || { bad=$((bad + 1)); [ $bad = 1 ] && cp "$work/pod.err" "$work/pod-first-bad.err"; }
  done
  "$tool" status --ledger-dir "$dflt" >"$work/pods-status.out" 2>&1
  if [ $bad != 0 ]; then
    echo "vramshim-test: FAIL $bad of $pods processes with a new tenant each failed; the first:"
    sed 's/^/    /' "$work/pod-first-bad.err"; fails=$((fails + 1))
  # The names used longest ago gave their entries first: pod-1 (and the
  # earlier cases' hami-test) went, pod-7..pod-70 are the 64 listed.
  elif ! grep -qw "pod-$pods" "$work/pods-status.out" || ! grep -qw "pod-7" "$work/pods-status.out" ||
       grep -qw "pod-1" "$work/pods-status.out"; then
    echo "vramshim-test: FAIL status after $pods tenants: pod-$pods or pod-7 missing, or pod-1 still listed:"
    sed 's/^/    /' "$work/pods-status.out"; fails=$((fails + 1))
  else
    echo "vramshim-test: ok $pods processes in turn, a new tenant each, on one card's ledger; status lists pod-$pods"
  fi
fi

# The processes without a config file used the private folder, not the machine's.
if [ -n "$private" ]; then
  n=$((n + 1))
  if ls "$dflt"/card-*-000000000500.ledger >/dev/null 2>&1; then
    echo "vramshim-test: ok the default ledger folder in use was the private one ($dflt)"
  else
    echo "vramshim-test: FAIL no ledger of the 5 GiB card in the private default folder $dflt:"; ls -la "$dflt"
    fails=$((fails + 1))
  fi
fi

echo "vramshim-test: $((n - fails)) of $n cases pass"
[ $fails = 0 ]
