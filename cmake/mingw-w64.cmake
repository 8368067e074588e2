# Cross-compiling for 64-bit Windows with Debian's MinGW-w64 (package
# gcc-mingw-w64-x86-64-win32):
#   cmake -S . -B build-win -DCMAKE_TOOLCHAIN_FILE=cmake/mingw-w64.cmake
#   cmake --build build-win
# The results run under wine64 (tests/windows) and on Windows.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(VS_MINGW_PREFIX x86_64-w64-mingw32)
set(CMAKE_C_COMPILER ${VS_MINGW_PREFIX}-gcc)
set(CMAKE_RC_COMPILER ${VS_MINGW_PREFIX}-windres)
set(CMAKE_FIND_ROOT_PATH /usr/${VS_MINGW_PREFIX})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# Windows programs need no separate runtime DLLs beside them: libgcc and
# winpthreads are linked in statically.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-static")
# ctest in a Windows build runs each test program under wine64; the
# runner (tests/windows/run) sets the throwaway WINEPREFIX it uses.
set(CMAKE_CROSSCOMPILING_EMULATOR /usr/lib/wine/wine64)
