# What the Windows build (cmake/mingw-w64.cmake) makes. It grows as each
# part is ported; the Linux build never reads this file.
#
# Libraries the Linux build takes from Debian:
# - inih: Debian packages no MinGW build of it (and its source package is
#   not reachable from the build machine's mirror), so the Windows build
#   compiles src/tenant/ini_compat/ini.c, a small reader with inih's
#   interface and default behaviour, proven equal to Debian's inih by
#   tests/tenant/test_ini_compat.c on Linux. It stands in for the target
#   PkgConfig::INIH that src/tenant links.
# - uthash: header-only. Its headers are copied from the Debian package
#   (/usr/include) into this build folder: /usr/include itself must never be
#   on a MinGW include path (it would pull glibc's headers in).
# C99 printf (%zu, %lld) from MinGW's own stdio, not msvcrt's.
add_compile_definitions(__USE_MINGW_ANSI_STDIO=1)

add_library(vs_ini_compat STATIC ${PROJECT_SOURCE_DIR}/src/tenant/ini_compat/ini.c)
target_include_directories(vs_ini_compat PUBLIC ${PROJECT_SOURCE_DIR}/src/tenant/ini_compat)
add_library(PkgConfig::INIH ALIAS vs_ini_compat)

set(VS_UTHASH_HEADERS uthash.h utlist.h utarray.h utstring.h)
set(UTHASH_INCLUDE_DIR ${PROJECT_BINARY_DIR}/uthash-include)
foreach(h IN LISTS VS_UTHASH_HEADERS)
  if(NOT EXISTS /usr/include/${h})
    message(FATAL_ERROR "uthash's ${h} not found in /usr/include (apt-get install uthash-dev)")
  endif()
  configure_file(/usr/include/${h} ${UTHASH_INCLUDE_DIR}/${h} COPYONLY)
endforeach()

add_subdirectory(src/platform)
add_subdirectory(src/common)
add_subdirectory(src/arena)
add_subdirectory(src/tenant)
add_subdirectory(src/explain)
add_subdirectory(tools/vramshim)

# The simulated driver as nvcuda.dll (tools/sim), the Windows tests
# (tests/windows, run under wine64 by tests/windows/run) and the ZIP package
# (cmake/windows-package.cmake, made once every part's targets exist).
if(NOT TARGET vramsim)   # another part may have added it already
  add_subdirectory(tools/sim)
endif()
# vramshim-replay-child.exe: `vramshim.exe replay --policy shim-*` runs it
# with vramshim.dll injected over the sim (tools/vramshim/replay_shim.c).
add_subdirectory(tools/replay-child)
# The shim (vramshim.dll, src/interpose) and vramshim.exe run: before the
# tests, which use them.
include(${PROJECT_SOURCE_DIR}/cmake/windows_interpose.cmake)
add_subdirectory(examples/windows)   # the Wine demo's server
enable_testing()
add_subdirectory(tests/windows)
include(cmake/windows-package.cmake)
cmake_language(DEFER CALL vs_windows_package)
