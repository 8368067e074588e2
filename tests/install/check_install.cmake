# Run by ctest: install into PREFIX, check the layout, build a consumer.
file(REMOVE_RECURSE ${PREFIX} ${CONSUMER_BIN})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX} RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "cmake --install failed: ${rc}")
endif()
foreach(f bin/vramshim include/vramshim.h ${LIBDIR}/libvramshim.so ${LIBDIR}/cmake/vramshim/vramshimConfig.cmake
          ${LIBDIR}/cmake/vramshim/vramshimConfigVersion.cmake ${LIBDIR}/pkgconfig/vramshim.pc)
  if(NOT EXISTS ${PREFIX}/${f})
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()
# The installed `vramshim run` preloads the installed shim.
execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=VRAMSHIM_LIBRARY --unset=LD_PRELOAD
                ${PREFIX}/bin/vramshim run -- env OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(rc OR NOT out MATCHES "\nLD_PRELOAD=${PREFIX}/${LIBDIR}/libvramshim.so\n")
  message(FATAL_ERROR "the installed vramshim run does not preload ${PREFIX}/${LIBDIR}/libvramshim.so: ${rc} ${out}")
endif()
# pkg-config sees the package.
set(ENV{PKG_CONFIG_PATH} ${PREFIX}/${LIBDIR}/pkgconfig)
execute_process(COMMAND pkg-config --cflags --libs vramshim OUTPUT_VARIABLE flags RESULT_VARIABLE rc)
if(rc OR NOT flags MATCHES "-lvramshim")
  message(FATAL_ERROR "pkg-config does not find vramshim: ${flags}")
endif()
# find_package(vramshim) works for a CMake consumer that calls the API.
execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_SRC} -B ${CONSUMER_BIN} -DCMAKE_PREFIX_PATH=${PREFIX}
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "find_package(vramshim) failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${CONSUMER_BIN} RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "the consumer does not build against the installed package")
endif()
execute_process(COMMAND ${CONSUMER_BIN}/consumer OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(rc OR NOT out MATCHES "vramshim 0\\.")
  message(FATAL_ERROR "the consumer did not run: ${rc} ${out}")
endif()
message(STATUS "installed layout, pkg-config and find_package all work")
