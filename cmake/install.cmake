# cmake --install: the shim, the tool, the header, a CMake package and a
# pkg-config file, the docs with the example config, and the tmpfiles.d line
# that makes the ledger directory. cmake/package.cmake packs the same into a .deb.
include(CMakePackageConfigHelpers)
# 0644: a shared library is not a program (Debian policy 8.1, lintian).
install(TARGETS vramshim EXPORT vramshimTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
install(TARGETS vramshim_tool RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/vramshim.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT vramshimTargets NAMESPACE vramshim:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vramshim)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/vramshimConfig.cmake.in
  ${PROJECT_BINARY_DIR}/vramshimConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vramshim)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/vramshimConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/vramshimConfig.cmake ${PROJECT_BINARY_DIR}/vramshimConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vramshim)
file(RELATIVE_PATH VS_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" VS_PC_TO_PREFIX "${VS_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/vramshim.pc.in ${PROJECT_BINARY_DIR}/vramshim.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/vramshim.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The docs, with the example config (systemd drop-in, Dockerfile, compose,
# Kubernetes manifests) under examples/.
set(VS_DOCDIR ${CMAKE_INSTALL_DATADIR}/doc/vramshim)
file(GLOB VS_DOC_FILES ${PROJECT_SOURCE_DIR}/docs/*.md ${PROJECT_SOURCE_DIR}/docs/*.json)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${VS_DOC_FILES} DESTINATION ${VS_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/config ${PROJECT_SOURCE_DIR}/examples/kubernetes
  DESTINATION ${VS_DOCDIR}/examples)
# systemd reads /usr/lib/tmpfiles.d and /usr/lib/systemd/system (not multiarch folders): lib/, not LIBDIR.
install(FILES ${PROJECT_SOURCE_DIR}/packaging/tmpfiles.d/vramshim.conf DESTINATION lib/tmpfiles.d)
# The recorder's unit (issue 26), installed but not enabled: the operator
# enables it (systemctl enable --now vramshim-record; docs/history.md).
install(FILES ${PROJECT_SOURCE_DIR}/packaging/systemd/vramshim-record.service DESTINATION lib/systemd/system)
# The JSON schemas and samples of the tool's outputs.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/schemas DESTINATION ${VS_DOCDIR})

include(${PROJECT_SOURCE_DIR}/cmake/package.cmake)
