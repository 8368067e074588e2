# cmake --install: the shim, the tool, the header, a CMake package and a pkg-config file.
include(CMakePackageConfigHelpers)
install(TARGETS vramshim EXPORT vramshimTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
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
