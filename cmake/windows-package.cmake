# `cpack -G ZIP` in build-win: vramshim-<version>-win64.zip, what an offline
# Windows site carries in: the shim (vramshim.dll), the tool (vramshim.exe),
# an example config, a short README and docs/windows.md. The simulated
# driver (build-win/sim/nvcuda.dll) is never packed: on a real machine the
# NVIDIA driver is nvcuda.dll.
#
# Run at the end of the Windows build's configure (cmake/windows.cmake
# defers it), so the targets of every part exist by then; a part not built
# yet is named here and left out of the archive.
function(vs_windows_package)
  set(VS_WIN_ZIP_FILES README-windows.txt vramshim.conf.example windows.md LICENSE)
  foreach(t vramshim vramshim_tool)
    if(TARGET ${t})
      install(TARGETS ${t} RUNTIME DESTINATION . LIBRARY DESTINATION . ARCHIVE DESTINATION lib EXCLUDE_FROM_ALL)
      get_target_property(name ${t} OUTPUT_NAME)
      if(NOT name)
        set(name ${t})
      endif()
      get_target_property(suffix ${t} SUFFIX)
      get_target_property(type ${t} TYPE)
      if(NOT suffix AND type STREQUAL "SHARED_LIBRARY")
        set(suffix .dll)
      elseif(NOT suffix)
        set(suffix .exe)
      endif()
      list(APPEND VS_WIN_ZIP_FILES ${name}${suffix})
    else()
      message(STATUS "vramshim: the ZIP package has no ${t} yet (that part is not in this build)")
    endif()
  endforeach()
  install(FILES ${PROJECT_SOURCE_DIR}/docs/windows-readme.txt DESTINATION . RENAME README-windows.txt)
  install(FILES ${PROJECT_SOURCE_DIR}/examples/windows/vramshim.conf DESTINATION . RENAME vramshim.conf.example)
  install(FILES ${PROJECT_SOURCE_DIR}/docs/windows.md ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION .)
  # what tests/windows/package checks the archive for
  list(SORT VS_WIN_ZIP_FILES)
  string(REPLACE ";" "\n" lines "${VS_WIN_ZIP_FILES}")
  file(WRITE ${PROJECT_BINARY_DIR}/package-files.txt "${lines}\n")
  set(CPACK_GENERATOR ZIP)
  set(CPACK_PACKAGE_NAME vramshim)
  set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
  set(CPACK_PACKAGE_VENDOR "The vramshim developers")
  set(CPACK_SYSTEM_NAME win64)
  set(CPACK_PACKAGE_FILE_NAME vramshim-${PROJECT_VERSION}-win64)
  set(CPACK_INCLUDE_TOPLEVEL_DIRECTORY ON)    # unzips into vramshim-<version>-win64\
  set(CPACK_STRIP_FILES ON)
  include(CPack)
endfunction()
