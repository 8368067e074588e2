# Profile-guided optimisation (GCC). scripts/profile-train builds the
# project once with VRAMSHIM_PROFILE_GENERATE=DIR and replays generated
# allocation traces through that build's shim over the sim, which writes
# DIR/*.gcda; scripts/setup then builds with VRAMSHIM_PROFILE_USE=DIR. The
# profile only moves code (which branch falls through, which part of a
# function goes out of line, what is inlined): the same source, the same
# behaviour, so the tests run against the library that ships. Why and what
# it buys: docs/benchmarks-shim.md, "Profile-guided build".
#
# Only the library's own code (src/, the static libraries libvramshim.so is
# made of) is instrumented and optimised with the profile: src/CMakeLists.txt
# adds VS_PROFILE_OPTIONS; tests, tools and the sim build as always.
# Both builds name a profile by its object's path below the build folder
# (-fprofile-prefix-path), so a profile made in one folder serves another.
# Functions the training never ran keep the normal optimisation
# (-fprofile-partial-training), and a profile older than an edited source
# is dropped for the functions that changed (-Wno-coverage-mismatch: an
# incremental build after an edit still builds).
set(VRAMSHIM_PROFILE_GENERATE "" CACHE PATH "write a training profile into this folder (GCC)")
set(VRAMSHIM_PROFILE_USE "" CACHE PATH "optimise with the training profile in this folder (GCC)")
if(VRAMSHIM_PROFILE_GENERATE AND VRAMSHIM_PROFILE_USE)
  message(FATAL_ERROR "VRAMSHIM_PROFILE_GENERATE and VRAMSHIM_PROFILE_USE exclude each other")
endif()
if(VRAMSHIM_PROFILE_GENERATE OR VRAMSHIM_PROFILE_USE)
  if(NOT CMAKE_C_COMPILER_ID STREQUAL "GNU")
    message(FATAL_ERROR "a profile-guided build needs GCC (this build's compiler: ${CMAKE_C_COMPILER_ID})")
  endif()
  if(VRAMSHIM_SANITIZE OR VRAMSHIM_TSAN OR VRAMSHIM_FUZZ)
    message(FATAL_ERROR "a profile-guided build is not a sanitizer or fuzzing build")
  endif()
endif()
set(VS_PROFILE_OPTIONS "")
if(VRAMSHIM_PROFILE_GENERATE)
  # atomic: a training process may run threads (the shim's background thread).
  set(VS_PROFILE_OPTIONS -fprofile-generate=${VRAMSHIM_PROFILE_GENERATE} -fprofile-update=atomic
                         -fprofile-prefix-path=${PROJECT_BINARY_DIR})
  # Everything linking those libraries needs the profiling runtime.
  add_link_options(-fprofile-generate=${VRAMSHIM_PROFILE_GENERATE})
elseif(VRAMSHIM_PROFILE_USE)
  file(GLOB vs_profiles ${VRAMSHIM_PROFILE_USE}/*.gcda)
  list(LENGTH vs_profiles vs_profile_count)
  if(vs_profile_count EQUAL 0)
    message(WARNING "VRAMSHIM_PROFILE_USE: no profile (*.gcda) in ${VRAMSHIM_PROFILE_USE}; built without one")
  else()
    message(STATUS "vramshim: profile-guided build (${vs_profile_count} profiles in ${VRAMSHIM_PROFILE_USE})")
    set(VS_PROFILE_OPTIONS -fprofile-use=${VRAMSHIM_PROFILE_USE} -fprofile-partial-training
                           -fprofile-prefix-path=${PROJECT_BINARY_DIR} -Wno-missing-profile -Wno-coverage-mismatch)
  endif()
endif()
