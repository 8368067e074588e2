# Every test's ctest TIMEOUT: a guard against a hang, not a speed bound. It is
# generous because the same tests run under ASan and TSan on a loaded 2-core
# machine; tests assert behaviour, and benchmarks (tools/bench) report speed.
set(VS_TEST_TIMEOUT 600)

# VRAMSIM_CONTEXT_OVERHEAD=0 for every test that names no value (see there).
include(${CMAKE_CURRENT_LIST_DIR}/sim_env.cmake)

# vs_add_cmocka_test(NAME SOURCES... LIBS ...): a CMocka unit test under ctest.
find_library(CMOCKA_LIB cmocka REQUIRED)
find_path(CMOCKA_INCLUDE_DIR cmocka.h REQUIRED)
function(vs_add_cmocka_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_include_directories(${name} PRIVATE ${CMOCKA_INCLUDE_DIR})
  target_link_libraries(${name} PRIVATE ${T_LIBS} ${CMOCKA_LIB})
  add_test(NAME ${name} COMMAND ${name})
  if(T_TIMEOUT)
    set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT})
  endif()
  if(T_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()

# VS_SIM_DIR (the top-level CMakeLists.txt): where the simulated driver is
# laid out as libcuda.so.1.

# What the shim's tests preload. An ASan-instrumented shim needs the ASan
# runtime first in the initial library list.
set(VS_SHIM_PRELOAD $<TARGET_FILE:vramshim>)
if(VRAMSHIM_SANITIZE)
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so
                  OUTPUT_VARIABLE VS_ASAN_RT OUTPUT_STRIP_TRAILING_WHITESPACE)
  set(VS_SHIM_PRELOAD "${VS_ASAN_RT}:$<TARGET_FILE:vramshim>")
endif()

# The system Python (Debian's packages: python3-jsonschema, python3-numba).
set(VS_PY /usr/bin/python3)
