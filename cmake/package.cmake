# `cpack -G DEB` in the build folder: vramshim_<version>_<arch>.deb, laid out
# under /usr by the install rules of install.cmake (the library in the
# multiarch libdir: see CMakeLists.txt). Depends is computed from the
# binaries (dpkg-shlibdeps: libc6, libinih1; the tool's libsqlite3-0 and
# libncursesw6 for record, history and top). The recorder's systemd unit
# (packaging/systemd) is installed but not enabled. The maintainer scripts
# (packaging/deb) make the group `vramshim` and /run/vramshim; nothing here
# or there writes /etc/ld.so.preload: preloading system-wide stays the
# operator's choice (README). tests/package installs the result into a clean
# Debian 12 root.

# Debian's own files in /usr/share/doc/vramshim: the copyright (DEP-5) and
# the changelog, compressed reproducibly (gzip -n: no name, no time stamp).
set(VS_PKG_DIR ${PROJECT_SOURCE_DIR}/packaging/deb)
file(READ ${VS_PKG_DIR}/changelog VS_CHANGELOG)
if(NOT VS_CHANGELOG MATCHES "^vramshim \\(${PROJECT_VERSION}\\)")
  message(FATAL_ERROR "packaging/deb/changelog: its first entry is not version ${PROJECT_VERSION}")
endif()
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${VS_PKG_DIR}/changelog)
execute_process(COMMAND gzip -9nc ${VS_PKG_DIR}/changelog OUTPUT_FILE ${PROJECT_BINARY_DIR}/changelog.gz
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "gzip of packaging/deb/changelog failed")
endif()
install(FILES ${PROJECT_BINARY_DIR}/changelog.gz ${VS_PKG_DIR}/copyright DESTINATION ${VS_DOCDIR})
# The manual page, and lintian's overrides with their reasons.
execute_process(COMMAND gzip -9nc ${PROJECT_SOURCE_DIR}/packaging/vramshim.1 OUTPUT_FILE ${PROJECT_BINARY_DIR}/vramshim.1.gz)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/packaging/vramshim.1)
install(FILES ${PROJECT_BINARY_DIR}/vramshim.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${VS_PKG_DIR}/lintian-overrides DESTINATION ${CMAKE_INSTALL_DATADIR}/lintian/overrides RENAME vramshim)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME vramshim)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "The vramshim developers")
set(VRAMSHIM_DEB_MAINTAINER "The vramshim developers <vramshim@example.org>" CACHE STRING
    "Maintainer field of the .deb")
set(CPACK_PACKAGE_CONTACT "${VRAMSHIM_DEB_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "predictable GPU memory for CUDA programs on shared cards")
# Debian's extended Description (CPack puts the summary above it): lines of
# at most 80 characters.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "libvramshim.so is preloaded under an unchanged CUDA program (LD_PRELOAD, or
vramshim run). It serves device allocations from an arena, enforces
per-tenant reservations and limits from /etc/vramshim.conf across processes,
gives each program a cuMemGetInfo view that matches its quota, honours
HAMi-core's CUDA_DEVICE_MEMORY_LIMIT variables, and explains memory: dumps,
timelines and trace replay through the vramshim tool; vramshim record keeps
weeks of history (SQLite) with drift verdicts and threshold actions, and
vramshim top is a live view.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)          # vramshim_0.1.0_amd64.deb
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)           # Depends: libc6, libinih1, libsqlite3-0, libncursesw6 (dpkg-shlibdeps)
# The sqlite3 shell recovers a history database the recorder moved aside (docs/history.md).
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "sqlite3")
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)     # the shlibs file for libvramshim.so.0
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${VS_PKG_DIR}/postinst ${VS_PKG_DIR}/postrm ${VS_PKG_DIR}/triggers)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
include(CPack)
