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

# Where the simulated driver is laid out as libcuda.so.1 (set by tools/sim).
set(VS_SIM_DIR ${PROJECT_BINARY_DIR}/sim)
