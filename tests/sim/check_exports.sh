#!/bin/sh
# Every cu* symbol libvramsim.so exports is in tools/sim/sim_api.def (so it
# has a call counter) and vice versa; nothing else but vramsim_* leaves it.
# usage: check_exports.sh LIBRARY SIM_API_DEF
set -eu
lib=$1 def=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nm -D --defined-only "$lib" | awk '{print $3}' | sort > "$tmp/all"
grep '^cu' "$tmp/all" > "$tmp/exported" || true
sed -n 's/^SIM_FN(\([A-Za-z0-9_]*\))$/\1/p' "$def" | sort > "$tmp/listed"
if ! diff "$tmp/exported" "$tmp/listed"; then
    echo "vramshim: sim: exports (<) and sim_api.def (>) differ" >&2
    exit 1
fi
if grep -v -e '^cu' -e '^vramsim_' "$tmp/all"; then
    echo "vramshim: sim: unexpected exported symbols above" >&2
    exit 1
fi
echo "vramshim: sim: $(wc -l < "$tmp/exported") cu* entry points, all counted"
