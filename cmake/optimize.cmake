# How src/ (the static libraries libvramshim.so is made of) is optimised
# beyond -O2: link-time optimisation of the library, and a profile-guided
# build. Both only move and inline code; why and what they buy:
# docs/benchmarks-shim.md, "Profile-guided build" and "Link-time
# optimisation". src/CMakeLists.txt adds VS_OPT_OPTIONS to its folder and
# VS_OPT_LINK_OPTIONS to libvramshim.so's link.
#
# Link-time optimisation (GCC, VRAMSHIM_LTO, on by default where the
# toolchain supports it): src/'s objects carry GCC's intermediate code
# beside their machine code (-ffat-lto-objects), and libvramshim.so's link
# optimises across the concerns' files (the hook, the memory service, the
# arena, the books are separate files, so each step of an allocation was a
# call). Everything else that links the static libraries (unit tests,
# tools) links their machine code as before, without a link-time step.
#
# Profile-guided optimisation (GCC). scripts/profile-train builds the
# project once with VRAMSHIM_PROFILE_GENERATE=DIR and replays generated
# allocation traces through that build's shim over the sim, which writes
# DIR/*.gcda; scripts/setup then builds with VRAMSHIM_PROFILE_USE=DIR. The
# profile only moves code (which branch falls through, which part of a
# function goes out of line, what is inlined): the same source, the same
# behaviour, so the tests run against the library that ships. Why and what
# it buys: docs/benchmarks-shim.md, "Profile-guided build".
#
# Only src/ is instrumented and optimised with the profile; tests, tools and
# the sim build as always.
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
set(VS_OPT_OPTIONS "")
set(VS_OPT_LINK_OPTIONS "")
if(VRAMSHIM_PROFILE_GENERATE)
  # atomic: a training process may run threads (the shim's background thread).
  set(VS_OPT_OPTIONS -fprofile-generate=${VRAMSHIM_PROFILE_GENERATE} -fprofile-update=atomic
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
    set(VS_OPT_OPTIONS -fprofile-use=${VRAMSHIM_PROFILE_USE} -fprofile-partial-training
                       -fprofile-prefix-path=${PROJECT_BINARY_DIR} -Wno-missing-profile -Wno-coverage-mismatch)
  endif()
endif()

option(VRAMSHIM_LTO "link-time optimisation of libvramshim.so (GCC)" ON)
# Not in a Debug build (what is debugged is the code as written).
if(VRAMSHIM_LTO AND CMAKE_C_COMPILER_ID STREQUAL "GNU" AND NOT WIN32 AND NOT VRAMSHIM_PROFILE_GENERATE
   AND NOT CMAKE_BUILD_TYPE STREQUAL "Debug" AND NOT (VRAMSHIM_SANITIZE OR VRAMSHIM_TSAN OR VRAMSHIM_FUZZ))
  include(CheckIPOSupported)
  check_ipo_supported(RESULT vs_lto_ok OUTPUT vs_lto_why LANGUAGES C)
  if(vs_lto_ok)
    list(APPEND VS_OPT_OPTIONS -flto=auto -ffat-lto-objects)
    list(APPEND VS_OPT_LINK_OPTIONS -flto=auto)
  else()
    message(STATUS "vramshim: no link-time optimisation (${vs_lto_why})")
  endif()
endif()
