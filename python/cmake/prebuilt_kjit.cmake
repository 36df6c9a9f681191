# KJIT_PREBUILT_DIR: link the Python module with a kjit installed at that prefix
# (cmake --install <build> --prefix <dir>) instead of building the core, for a machine that has
# the CUDA toolkit, a compiler and Python but not kjit's build dependencies' headers (OpenSSL,
# nlohmann-json, CLI11): only the installed kjit's headers and static libraries are compiled
# against, and its private dependencies are linked as libraries (docs/PYTHON.md, "Building").
# The installed package's own config (find_package(kjit)) asks for OpenSSL's headers, which this
# case cannot have, so its target file is read directly with the targets it names made here.
file(GLOB kjit_targets_file "${KJIT_PREBUILT_DIR}/lib*/cmake/kjit/kjitTargets.cmake"
     "${KJIT_PREBUILT_DIR}/lib/*/cmake/kjit/kjitTargets.cmake")
list(LENGTH kjit_targets_file kjit_n)
if(NOT kjit_n EQUAL 1)
  message(FATAL_ERROR "KJIT_PREBUILT_DIR=${KJIT_PREBUILT_DIR}: expected one lib*/cmake/kjit/"
                      "kjitTargets.cmake under it (cmake --install <build> --prefix <dir>), "
                      "found ${kjit_n}")
endif()
get_filename_component(kjit_prebuilt_libdir "${kjit_targets_file}" DIRECTORY)
get_filename_component(kjit_prebuilt_libdir "${kjit_prebuilt_libdir}/../.." ABSOLUTE)

find_package(Threads REQUIRED)
find_package(CUDAToolkit 12.0 REQUIRED)

# A private dependency of libkjit.a / libkjit_cache.a as an imported library: the package's
# target if its headers are here too, else the shared library alone (searched on the system and
# in the prefix's lib folder, where a recipe may put a copy).
function(kjit_library_target target)
  if(TARGET ${target})
    return()
  endif()
  string(MAKE_C_IDENTIFIER "KJIT_LIB_${target}" var)
  find_library(${var} NAMES ${ARGN} HINTS "${kjit_prebuilt_libdir}")
  if(NOT ${var})
    message(FATAL_ERROR "KJIT_PREBUILT_DIR: kjit links ${target}, but none of '${ARGN}' was "
                        "found (install it, or copy it into ${kjit_prebuilt_libdir})")
  endif()
  add_library(${target} UNKNOWN IMPORTED GLOBAL)
  set_target_properties(${target} PROPERTIES IMPORTED_LOCATION "${${var}}")
  message(STATUS "KJIT_PREBUILT_DIR: ${target} is ${${var}}")
endfunction()

find_package(OpenSSL QUIET COMPONENTS Crypto)
kjit_library_target(OpenSSL::Crypto crypto libcrypto.so.3)
file(READ "${kjit_targets_file}" kjit_targets_text)
if(kjit_targets_text MATCHES "PkgConfig::HIREDIS")
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(HIREDIS QUIET IMPORTED_TARGET hiredis)
  endif()
  kjit_library_target(PkgConfig::HIREDIS hiredis libhiredis.so.1.1.0 libhiredis.so.0.14)
endif()
include("${kjit_targets_file}")
