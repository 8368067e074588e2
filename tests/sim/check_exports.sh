#!/bin/sh
# The sim's exports:
#  - every function cuda.h declares (every ABI name, as gen_stubs.sh lists
#    them from the header) is exported, so any program linked with -lcuda
#    loads over the sim;
#  - every exported cu* symbol is either modelled (listed in
#    tools/sim/sim_api.def, so it has a call counter) or a generated stub
#    returning CUDA_ERROR_NOT_SUPPORTED; nothing else but vramsim_* leaves it;
#  - cuGetProcAddress finds every one of them (checked by sim_procaddr).
# usage: check_exports.sh LIBRARY SIM_API_DEF CC CUDA_INCLUDE_DIR [OBJDUMP]
# With OBJDUMP, LIBRARY is the Windows build's nvcuda.dll, whose export
# table that objdump prints (the same checks hold there).
set -eu
lib=$1 def=$2 cc=$3 inc=$4 objdump=${5:-}
here=$(dirname "$0")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -n "$objdump" ]; then
    "$objdump" -p "$lib" | awk '/^\[Ordinal\/Name Pointer\] Table/ { f = 1; next }
                               f && /^\t\[ *[0-9]+\] / { print $NF } f && /^$/ { f = 0 }' |
        LC_ALL=C sort > "$tmp/all"
else
    nm -D --defined-only "$lib" | awk '{print $3}' | LC_ALL=C sort > "$tmp/all"
fi
grep '^cu' "$tmp/all" > "$tmp/exported" || true
sed -n 's/^SIM_FN(\([A-Za-z0-9_]*\))$/\1/p' "$def" | LC_ALL=C sort > "$tmp/listed"
sh "$here/../../tools/sim/gen_stubs.sh" --names "$cc" "$inc" > "$tmp/cuda"
status=0
if [ "$(wc -l < "$tmp/cuda")" -lt 400 ]; then
    echo "vramshim: sim: only $(wc -l < "$tmp/cuda") functions found in $inc/cuda.h" >&2
    status=1
fi
if LC_ALL=C comm -23 "$tmp/cuda" "$tmp/exported" | grep .; then
    echo "vramshim: sim: the functions above are declared in cuda.h but not exported" >&2
    status=1
fi
if LC_ALL=C comm -13 "$tmp/cuda" "$tmp/listed" | grep .; then
    echo "vramshim: sim: sim_api.def lists the functions above, which cuda.h does not declare" >&2
    status=1
fi
if LC_ALL=C comm -13 "$tmp/cuda" "$tmp/exported" | LC_ALL=C comm -23 - "$tmp/listed" | grep .; then
    echo "vramshim: sim: the exports above are neither in cuda.h nor in sim_api.def" >&2
    status=1
fi
if LC_ALL=C comm -13 "$tmp/exported" "$tmp/listed" | grep .; then
    echo "vramshim: sim: sim_api.def lists the functions above, which the library does not export" >&2
    status=1
fi
if grep -v -e '^cu' -e '^vramsim_' "$tmp/all"; then
    echo "vramshim: sim: unexpected exported symbols above" >&2
    status=1
fi
[ $status = 0 ] || exit 1
echo "vramshim: sim: $(wc -l < "$tmp/exported") cu* entry points ($(wc -l < "$tmp/cuda") in cuda.h): $(wc -l < "$tmp/listed") modelled and counted, the rest CUDA_ERROR_NOT_SUPPORTED"
