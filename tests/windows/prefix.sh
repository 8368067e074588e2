# Sourced by tests/windows/run and scripts/demo --wine: a throwaway Wine
# prefix whose system32 holds the simulated driver as nvcuda.dll (and its
# NVML as nvml.dll).
#   vs_prefix_up BUILD_WIN   makes and boots it; exports WINEPREFIX, WINEDEBUG
#                            and VS_WINE; starts the keeper (below)
#   vs_prefix_down           stops only this prefix's wineserver, deletes it
#                            (VS_WIN_KEEP_PREFIX=1 keeps it)
# WINE64 overrides /usr/lib/wine/wine64.
VS_WINE=${WINE64:-/usr/lib/wine/wine64}
VS_WINESERVER=$(dirname "$VS_WINE")/wineserver
vs_prefix=""

vs_prefix_check_tools() {
    for tool in x86_64-w64-mingw32-gcc "$VS_WINE" "$VS_WINESERVER"; do
        command -v "$tool" >/dev/null 2>&1 || {
            echo "vramshim: $tool is missing (apt-get install gcc-mingw-w64-x86-64-win32 wine64)" >&2
            return 2
        }
    done
}

vs_prefix_up() { # BUILD_WIN
    local build=$1
    vs_prefix=$(mktemp -d "${TMPDIR:-/tmp}/vramshim-wine.XXXXXX")
    export WINEPREFIX="$vs_prefix" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
    unset DISPLAY WAYLAND_DISPLAY
    "$VS_WINE" wineboot -i >/dev/null 2>&1 || { echo "vramshim: wineboot failed in $vs_prefix" >&2; return 2; }
    "$VS_WINESERVER" -w >/dev/null 2>&1 || true   # the boot's processes are done
    local sys32="$vs_prefix/drive_c/windows/system32"
    [ -d "$sys32" ] || { echo "vramshim: $sys32 missing after wineboot" >&2; return 2; }
    cp "$build/sim/nvcuda.dll" "$sys32/nvcuda.dll"
    # the sim's NVML where NVIDIA's driver puts nvml.dll (issue 24)
    [ ! -f "$build/sim/nvml.dll" ] || cp "$build/sim/nvml.dll" "$sys32/nvml.dll"
    # One process alive for the whole run, its output sent nowhere: Wine's
    # system processes start with it (not with the first test, whose stdout
    # they would keep open until ctest's timeout) and stay up, so each
    # program starts fast.
    [ -f "$build/tests/windows/vs_win_keeper.exe" ] || { echo "vramshim: vs_win_keeper.exe was not built" >&2; return 2; }
    "$VS_WINE" "$build/tests/windows/vs_win_keeper.exe" </dev/null >/dev/null 2>&1 &
    # returns once Wine's start-up is done, whoever began it: both have
    # their output sent nowhere
    "$VS_WINE" "$build/tests/windows/vs_win_keeper.exe" --ready </dev/null >/dev/null 2>&1 || true
}

vs_prefix_down() {
    [ -n "$vs_prefix" ] || return 0
    # only this prefix's wineserver: other Wine users on the machine keep theirs
    WINEPREFIX="$vs_prefix" "$VS_WINESERVER" -k >/dev/null 2>&1 || true
    WINEPREFIX="$vs_prefix" "$VS_WINESERVER" -w >/dev/null 2>&1 || true
    if [ "${VS_WIN_KEEP_PREFIX:-0}" = 1 ]; then
        echo "vramshim: Wine prefix kept at $vs_prefix" >&2
    else
        rm -rf "$vs_prefix"
    fi
    vs_prefix=""
}
