# The Box2D envs: Box2D's C++ from the box2d-py sdist, compiled into their own extension
# module, aiopool._native._box2d.
#
# gymnasium's Box2D envs step the Box2D 2.3 that its `box2d` extra installs as a wheel (SWIG
# bindings, no sources); the box2d-py 2.3.8 sdist on PyPI carries the same C++ (Box2D 2.3.2 with
# pybox2d's settings, such as 16 polygon vertices). Like ALE's, its code never enters this
# repository: the build fetches it with pip. Box2D is under the zlib licence (LICENSES/BOX2D.md).
#
#   -DAIOPOOL_WITH_BOX2D=OFF          build without the Box2D envs
#   -DBOX2D_SOURCE_DIR=/path/box2d-py-2.3.8   an unpacked sdist (offline or cached builds)
#   -DAIOPOOL_BOX2D_PGO=OFF           build Box2D without its profile (below)
#
# If the source cannot be fetched, the build goes on without _box2d and says why; Python then
# reports the Box2D envs as unavailable (aiopool.registry.unavailable_families()).

option(AIOPOOL_WITH_BOX2D "Build the Box2D envs (Box2D from the box2d-py sdist)" ON)
option(AIOPOOL_BOX2D_PGO "Build Box2D with a profile of the envs' steps (GCC 11+)" ON)
set(BOX2D_PY_VERSION "2.3.8")
set(BOX2D_PY_SDIST_SHA256 "bdacfbbc56079bb317548efe49d3d5a86646885cc27f4a2ee97e4b2960921ab7")

include(cmake/sdist.cmake)

# Box2D's sources (_box2d_sources) as a static library, with extra compile options.
function(aiopool_box2d_library name)
  add_library(${name} STATIC EXCLUDE_FROM_ALL ${_box2d_sources}
              "${PROJECT_SOURCE_DIR}/cmake/box2d_shim/assertion.cc"
              "${PROJECT_SOURCE_DIR}/cmake/box2d_shim/timer.cc")
  target_include_directories(${name} SYSTEM PUBLIC "${BOX2D_SOURCE_DIR}")
  # Box2D's failed assertions throw without touching Python (cmake/box2d_shim/Python.h).
  target_include_directories(${name} BEFORE PRIVATE "${PROJECT_SOURCE_DIR}/cmake/box2d_shim")
  target_compile_options(${name} PRIVATE -O3 -ffp-contract=off -w ${ARGN})
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON CXX_STANDARD 11)
endfunction()

# benchmarks/env_limit.cc for one env class, "<prefix>_<Class>:<header>[:...]", on a Box2D
# library: <prefix>_<Class> steps that class alone, one thread, no pool, no Python.
function(aiopool_box2d_limit spec library)
  string(REPLACE ":" ";" spec "${spec}")
  list(GET spec 0 target)
  list(GET spec 1 header)
  string(REGEX REPLACE "^.*_" "" class "${target}")
  add_executable(${target} EXCLUDE_FROM_ALL benchmarks/env_limit.cc)
  target_compile_definitions(${target} PRIVATE
    "LIMIT_ENV_HEADER=\"${PROJECT_SOURCE_DIR}/aiopool/_native/envs/box2d/${header}.h\""
    "LIMIT_ENV=::aiopool::${class}")
  target_link_libraries(${target} PRIVATE ${library})
  target_include_directories(${target} BEFORE PRIVATE
                             "${PROJECT_SOURCE_DIR}/cmake/box2d_shim")  # no Python here
  target_compile_options(${target} PRIVATE $<$<CONFIG:Release>:-O3> -ffp-contract=off)
endfunction()

if(AIOPOOL_WITH_BOX2D)
  aiopool_sdist_source(box2d-py ${BOX2D_PY_VERSION} ${BOX2D_PY_SDIST_SHA256}
                       box2d-py-${BOX2D_PY_VERSION} Box2D/Box2D.h BOX2D_SOURCE_DIR _box2d_why)

  if(NOT BOX2D_SOURCE_DIR)
    message(WARNING "aiopool: building WITHOUT the Box2D envs: ${_box2d_why}. Pass "
                    "-DBOX2D_SOURCE_DIR=/path/to/box2d-py-${BOX2D_PY_VERSION} (an unpacked sdist), "
                    "or -DAIOPOOL_WITH_BOX2D=OFF to silence this.")
  else()
    message(STATUS "aiopool: Box2D from ${BOX2D_SOURCE_DIR}")
    file(GLOB_RECURSE _box2d_sources "${BOX2D_SOURCE_DIR}/Box2D/*.cpp")
    # Box2D's profiling clock: cmake/box2d_shim/timer.cc stands in (no clock reads in a step;
    # the figures it fed, b2World::GetProfile's, are read by no env).
    list(FILTER _box2d_sources EXCLUDE REGEX "/Common/b2Timer\\.cpp$")
    # As the wheel's build: baseline x86-64, no fast-math, no FMA contraction. (-fno-math-errno,
    # hidden symbols and link-time optimisation were tried: no measurable gain.)
    aiopool_box2d_library(aiopool_box2d)

    # Profile-guided Box2D (GCC 11 or later, not cross-compiling): Box2D is first built
    # instrumented (aiopool_box2d_train), the limit programs of LunarLander and BipedalWalker step
    # it for a fixed number of rounds (the same profile on every build), and aiopool_box2d is
    # compiled with that profile. A profile steers inlining, unrolling, vectorisation and code
    # layout, never the arithmetic: the parity tests hold, and one-thread steps are faster
    # (LunarLander's limit +11 %, BipedalWalker's +7 %; docs/performance.md#box2d). The
    # training costs a second Box2D compile and about two seconds.
    if(AIOPOOL_BOX2D_PGO AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU"
       AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 11 AND NOT CMAKE_CROSSCOMPILING)
      set(_profile "${CMAKE_CURRENT_BINARY_DIR}/box2d_profile")
      # GCC names a profile file after the object's absolute path less -fprofile-prefix-path,
      # the target's directory as GCC sees it (symbolic links resolved), so that the two builds
      # of a source find the same file; cmake/box2d_profile.cmake checks the names.
      get_filename_component(_objects "${CMAKE_CURRENT_BINARY_DIR}/CMakeFiles" REALPATH)
      aiopool_box2d_library(aiopool_box2d_train "-fprofile-generate=${_profile}" -fprofile-update=single
        "-fprofile-prefix-path=${_objects}/aiopool_box2d_train.dir")
      set(_trainers "")
      foreach(_env LunarLander:lunar_lander:1500 BipedalWalker:bipedal_walker:400)
        aiopool_box2d_limit("box2d_train_${_env}" aiopool_box2d_train)
        string(REGEX MATCH "^[^:]*" _class "${_env}")
        string(REGEX MATCH "[^:]*$" _rounds "${_env}")
        target_link_options(box2d_train_${_class} PRIVATE -fprofile-generate)
        list(APPEND _trainers "$<TARGET_FILE:box2d_train_${_class}>|${_class}-v3|32|rounds=${_rounds}")
      endforeach()
      string(REPLACE ";" "," _trainers "${_trainers}")
      add_custom_command(OUTPUT "${_profile}/trained"
        COMMAND "${CMAKE_COMMAND}" "-DPROFILE=${_profile}" "-DTRAINERS=${_trainers}"
                -P "${PROJECT_SOURCE_DIR}/cmake/box2d_profile.cmake"
        DEPENDS box2d_train_LunarLander box2d_train_BipedalWalker
                "${PROJECT_SOURCE_DIR}/cmake/box2d_profile.cmake"
        COMMENT "aiopool: training Box2D's profile on LunarLander and BipedalWalker" VERBATIM)
      add_custom_target(aiopool_box2d_profile DEPENDS "${_profile}/trained")
      # Order only: a profile trained again later (an env header changed) does not rebuild
      # Box2D, whose objects keep the profile they were built with (the same arithmetic).
      add_dependencies(aiopool_box2d aiopool_box2d_profile)
      target_compile_options(aiopool_box2d PRIVATE "-fprofile-use=${_profile}"
        -fprofile-partial-training -Wno-missing-profile
        "-fprofile-prefix-path=${_objects}/aiopool_box2d.dir")
      message(STATUS "aiopool: Box2D built with a profile of LunarLander and BipedalWalker")
    elseif(AIOPOOL_BOX2D_PGO)
      message(STATUS "aiopool: Box2D built without a profile (it needs GCC 11 or later, natively; "
                     "this is ${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION})")
    endif()

    aiopool_add_module(_box2d aiopool/_native/box2d_module.cc)
    target_link_libraries(_box2d PRIVATE aiopool_box2d)
    # Box2D's symbols stay inside the module (gymnasium's own copy may be loaded beside it).
    target_link_options(_box2d PRIVATE "-Wl,--exclude-libs,ALL")

    # The limit rows of benchmarks/throughput.py: each env class and the module's Box2D build,
    # one thread, no pool (cmake --build <build dir> --target box2d_limit_LunarLander).
    foreach(_env LunarLander:lunar_lander LunarLanderContinuous:lunar_lander
                 BipedalWalker:bipedal_walker BipedalWalkerHardcore:bipedal_walker
                 CarRacing:car_racing)
      aiopool_box2d_limit("box2d_limit_${_env}" aiopool_box2d)
    endforeach()
  endif()
endif()
