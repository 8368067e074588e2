# What the Windows build (cmake/mingw-w64.cmake) makes. It grows as each
# part is ported; the Linux build never reads this file.
