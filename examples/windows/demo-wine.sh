#!/bin/bash
# scripts/demo --wine: the demo's server under Wine, on a simulated 3 GiB
# card without VMM, as on the hospital's Windows machine.
#
#   1. the imaging server on the bare card: everything fits, the large
#      studies too;
#   2. the same server started with `vramshim.exe run --tenant imaging`
#      under a config that gives it a 2 GiB limit on that card: its view
#      (cuMemGetInfo) is its limit, the large studies are refused with
#      CUDA_ERROR_OUT_OF_MEMORY and the server goes on; then `vramshim.exe
#      status`.
# Part 2 needs the shim (build-win/vramshim.dll) and the tool
# (build-win/vramshim.exe); where they are not built it says so and stops.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD_WIN:-build-win}
. tests/windows/prefix.sh
if ! vs_prefix_check_tools 2>/dev/null; then
    scripts/setup >/dev/null   # installs gcc-mingw-w64-x86-64-win32 and wine64
    vs_prefix_check_tools
fi
say() { printf '\n== %s\n' "$*"; }

say "building the Windows build ($build)"
[ -f "$build/CMakeCache.txt" ] || cmake -S . -B "$build" -DCMAKE_TOOLCHAIN_FILE=cmake/mingw-w64.cmake >/dev/null
cmake --build "$build" -j"${VS_JOBS:-2}" >/dev/null || cmake --build "$build" -j1
trap vs_prefix_down EXIT
trap 'exit 130' INT TERM
vs_prefix_up "$build"
echo "   a throwaway Wine prefix: $WINEPREFIX, the simulated driver as its system32\\nvcuda.dll"

export VRAMSIM_CARDS=3GiB VRAMSIM_VMM=0 VRAMSIM_STATE="$WINEPREFIX/vramsim.state"
winpath() { printf 'Z:%s' "$1" | tr / '\\'; }
server=$build/examples/windows/imaging_server.exe

say "1. the imaging server on the bare card (3 GiB, no VMM), no vramshim"
"$VS_WINE" "$server"

shim=$build/vramshim.dll tool=$build/vramshim.exe
if [ ! -f "$shim" ] || [ ! -f "$tool" ]; then
    say "2. under vramshim: NOT RUN"
    echo "   $shim and/or $tool are not in this build: the shim and 'vramshim.exe run'"
    echo "   come from the interposer part of issue 12. Once they are built, this step runs"
    echo "   the same server with: vramshim.exe run --tenant imaging --config demo.conf -- imaging_server.exe"
    exit 0
fi
conf=$WINEPREFIX/demo.conf
cat >"$conf" <<CONF
; The hospital's card: 3 GiB without VMM, an imaging server and a viewer.
[global]
arena = chunks

[card 0]
headroom = 256MiB

[tenant imaging]
reserve = 1.5GiB
limit = 2GiB
on_limit = fail

[tenant viewer]
reserve = 512MiB
limit = 768MiB
CONF
say "the plan of the card (vramshim.exe check)"
"$VS_WINE" "$tool" check "$(winpath "$conf")" --card-capacity 3GiB || true
say "2. the same server under vramshim: tenant imaging, limit 2 GiB"
rc=0
"$VS_WINE" "$tool" run --tenant imaging --config "$(winpath "$conf")" -- "$(winpath "$(pwd)/$server")" \
    | tee "$WINEPREFIX/under-shim.txt" || rc=$?
echo "   (the server's exit code through vramshim.exe run: $rc)"
if ! grep -q "cuMemGetInfo says 2.00 GiB total" "$WINEPREFIX/under-shim.txt"; then
    echo "   NOTE: the server's view is not its tenant's 2 GiB limit: this build's vramshim.dll"
    echo "   does not enforce tenants yet (the interposer's interim DLL, before the tenant"
    echo "   concern is ported to Windows). With the whole shim the large studies are refused."
fi
say "vramshim.exe status"
VRAMSHIM_CONFIG=$(winpath "$conf") "$VS_WINE" "$tool" status || true
