# The Atari envs: ALE's C++ core, built from the ale-py source distribution and linked into its
# own extension module, aiopool._native._atari.
#
# ALE is GPL-2.0-only; the rest of aiopool is Apache-2.0. That is why ALE's code never enters
# this repository (the build fetches the ale-py sdist from PyPI with pip) and why it is linked
# into a separate module with its symbols hidden: the _atari module as built is GPL-2.0-only,
# every other module stays Apache-2.0. See LICENSES/ATARI.md.
#
#   -DAIOPOOL_WITH_ALE=OFF          build without the Atari envs
#   -DALE_SOURCE_DIR=/path/ale_py-0.12.1   an unpacked sdist (offline or cached builds)
#
# If the source cannot be fetched, the build goes on without _atari and says why; Python then
# reports the Atari envs as unavailable (aiopool.registry.unavailable_families()).

option(AIOPOOL_WITH_ALE "Build the Atari envs (ALE from the ale-py sdist; GPL-2.0-only module)" ON)
set(ALE_PY_VERSION "0.12.1")
set(ALE_PY_SDIST_SHA256 "c503d574c5983e1063b451201ccb779d935919c0f6bf116fb0f4f8aa4c86d249")

include(cmake/sdist.cmake)

if(AIOPOOL_WITH_ALE)
  aiopool_sdist_source(ale-py ${ALE_PY_VERSION} ${ALE_PY_SDIST_SHA256} ale_py-${ALE_PY_VERSION}
                       src/ale/ale_interface.cpp ALE_SOURCE_DIR _ale_why)
  find_package(ZLIB QUIET)
  if(ALE_SOURCE_DIR AND NOT ZLIB_FOUND)
    set(_ale_why "ALE needs zlib (Debian/Ubuntu: apt install zlib1g-dev)")
    set(ALE_SOURCE_DIR "")
  endif()

  if(NOT ALE_SOURCE_DIR)
    message(WARNING "aiopool: building WITHOUT the Atari envs: ${_ale_why}. Pass "
                    "-DALE_SOURCE_DIR=/path/to/ale_py-${ALE_PY_VERSION} (an unpacked sdist), or "
                    "-DAIOPOOL_WITH_ALE=OFF to silence this.")
  else()
    message(STATUS "aiopool: ALE from ${ALE_SOURCE_DIR}")
    # ALE's `ale` object library only: BUILD_CPP_LIB=OFF keeps ALE's install rules (its
    # headers and libale.a) out of our wheel; ale_interface.cpp is compiled below instead.
    set(BUILD_CPP_LIB OFF CACHE BOOL "" FORCE)
    set(BUILD_PYTHON_LIB OFF CACHE BOOL "" FORCE)
    set(BUILD_VECTOR_LIB OFF CACHE BOOL "" FORCE)
    set(BUILD_VECTOR_XLA_LIB OFF CACHE BOOL "" FORCE)
    set(SDL_SUPPORT OFF CACHE BOOL "" FORCE)
    add_subdirectory("${ALE_SOURCE_DIR}" "${CMAKE_BINARY_DIR}/ale" EXCLUDE_FROM_ALL)

    # ALE sets its include directories per directory, so they do not travel with its targets.
    set(_ale_includes "${ALE_SOURCE_DIR}/src" "${CMAKE_BINARY_DIR}/ale/src/ale")
    add_library(aiopool_ale STATIC EXCLUDE_FROM_ALL "${ALE_SOURCE_DIR}/src/ale/ale_interface.cpp")
    target_include_directories(aiopool_ale SYSTEM PUBLIC ${_ale_includes})
    target_compile_options(aiopool_ale PRIVATE -O3)
    set_target_properties(aiopool_ale PROPERTIES POSITION_INDEPENDENT_CODE ON)
    target_link_libraries(aiopool_ale PUBLIC ale ZLIB::ZLIB Threads::Threads)

    aiopool_add_module(_atari aiopool/_native/atari_module.cc)
    target_link_libraries(_atari PRIVATE aiopool_ale)
    # ALE's symbols stay inside the module (ale-py's own copy may be loaded beside it).
    target_link_options(_atari PRIVATE "-Wl,--exclude-libs,ALL")
  endif()
endif()

# The limit row of benchmarks/throughput.py: the same env code and ALE build with the module's
# flags, one thread, no pool. Built on demand (cmake --build <build dir> --target atari_limit).
if(TARGET aiopool_ale)
  add_executable(atari_limit EXCLUDE_FROM_ALL benchmarks/env_limit.cc)
  target_compile_definitions(atari_limit PRIVATE
    "LIMIT_ENV_HEADER=\"${PROJECT_SOURCE_DIR}/aiopool/_native/envs/atari/atari.h\""
    "LIMIT_ENV=::aiopool::atari::Atari" "LIMIT_SETUP=ale::Logger::setMode(ale::Logger::Error)")
  target_link_libraries(atari_limit PRIVATE aiopool_ale)
  target_compile_options(atari_limit PRIVATE $<$<CONFIG:Release>:-O3> -ffp-contract=off)
endif()
