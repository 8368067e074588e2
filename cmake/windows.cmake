# What the Windows build (cmake/mingw-w64.cmake) makes. It grows as each
# part is ported; the Linux build never reads this file.

# The simulated driver as nvcuda.dll (tools/sim), the Windows tests
# (tests/windows, run under wine64 by tests/windows/run) and the ZIP package
# (cmake/windows-package.cmake, made once every part's targets exist).
if(NOT TARGET vramsim)   # another part may have added it already
  add_subdirectory(tools/sim)
endif()
add_subdirectory(examples/windows)   # the Wine demo's server
enable_testing()
add_subdirectory(tests/windows)
include(cmake/windows-package.cmake)
cmake_language(DEFER CALL vs_windows_package)
