# What the Windows build (cmake/mingw-w64.cmake) makes. It grows as each
# part is ported; the Linux build never reads this file.

# The simulated driver as nvcuda.dll (tools/sim) and the Windows tests
# (tests/windows, run under wine64 by tests/windows/run).
add_subdirectory(tools/sim)
enable_testing()
add_subdirectory(tests/windows)
