# Every test runs over the sim with VRAMSIM_CONTEXT_OVERHEAD=0 unless its
# own ENVIRONMENT names a value. The sim's default (docs/sim.md, "Context
# overhead") takes card memory for each context, as a real card does; the
# tests written before it count capacities to the byte (a card filled
# exactly, free memory equal to capacity minus allocations), which is what
# they check, so they keep the overhead out. The tests of the overhead
# itself and of the true footprint (tests/nvml) set their own.
#
# add_test is wrapped here (tests/common.cmake and tests/windows include
# this file before any test is added): the default is applied at the end of
# the folder that added the test, after its set_tests_properties calls.
function(vs_test_default_env name)
  get_test_property(${name} ENVIRONMENT env)
  if(NOT env)
    set(env "")
  endif()
  if(NOT env MATCHES "(^|;)VRAMSIM_CONTEXT_OVERHEAD=")
    set_tests_properties(${name} PROPERTIES ENVIRONMENT "VRAMSIM_CONTEXT_OVERHEAD=0;${env}")
  endif()
endfunction()
function(add_test)
  _add_test(${ARGV})
  if(ARGV0 STREQUAL "NAME")
    set(name ${ARGV1})
  else()
    set(name ${ARGV0})
  endif()
  # the name is fixed now; a deferred call's arguments are evaluated when it runs
  cmake_language(EVAL CODE "cmake_language(DEFER CALL vs_test_default_env [[${name}]])")
endfunction()
