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
#
# If the source cannot be fetched, the build goes on without _box2d and says why; Python then
# reports the Box2D envs as unavailable (aiopool.registry.unavailable_families()).

option(AIOPOOL_WITH_BOX2D "Build the Box2D envs (Box2D from the box2d-py sdist)" ON)
set(BOX2D_PY_VERSION "2.3.8")
set(BOX2D_PY_SDIST_SHA256 "bdacfbbc56079bb317548efe49d3d5a86646885cc27f4a2ee97e4b2960921ab7")

include(cmake/sdist.cmake)

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
    add_library(aiopool_box2d STATIC EXCLUDE_FROM_ALL ${_box2d_sources}
                "${PROJECT_SOURCE_DIR}/cmake/box2d_shim/assertion.cc")
    target_include_directories(aiopool_box2d SYSTEM PUBLIC "${BOX2D_SOURCE_DIR}")
    # Box2D's failed assertions throw without touching Python (cmake/box2d_shim/Python.h).
    target_include_directories(aiopool_box2d BEFORE PRIVATE "${PROJECT_SOURCE_DIR}/cmake/box2d_shim")
    # As the wheel's build: baseline x86-64, no fast-math, no FMA contraction. (-fno-math-errno,
    # hidden symbols and link-time optimisation were tried: no measurable gain.)
    target_compile_options(aiopool_box2d PRIVATE -O3 -ffp-contract=off -w)
    set_target_properties(aiopool_box2d PROPERTIES POSITION_INDEPENDENT_CODE ON CXX_STANDARD 11)

    aiopool_add_module(_box2d aiopool/_native/box2d_module.cc)
    target_link_libraries(_box2d PRIVATE aiopool_box2d)
    # Box2D's symbols stay inside the module (gymnasium's own copy may be loaded beside it).
    target_link_options(_box2d PRIVATE "-Wl,--exclude-libs,ALL")

    # The limit rows of benchmarks/throughput.py: each env class and the module's Box2D build,
    # one thread, no pool (cmake --build <build dir> --target box2d_limit_LunarLander).
    foreach(_env LunarLander:lunar_lander LunarLanderContinuous:lunar_lander
                 BipedalWalker:bipedal_walker BipedalWalkerHardcore:bipedal_walker
                 CarRacing:car_racing)
      string(REPLACE ":" ";" _env "${_env}")
      list(GET _env 0 _class)
      list(GET _env 1 _header)
      add_executable(box2d_limit_${_class} EXCLUDE_FROM_ALL benchmarks/env_limit.cc)
      target_compile_definitions(box2d_limit_${_class} PRIVATE
        "LIMIT_ENV_HEADER=\"${PROJECT_SOURCE_DIR}/aiopool/_native/envs/box2d/${_header}.h\""
        "LIMIT_ENV=::aiopool::${_class}")
      target_link_libraries(box2d_limit_${_class} PRIVATE aiopool_box2d)
      target_include_directories(box2d_limit_${_class} BEFORE PRIVATE
                                 "${PROJECT_SOURCE_DIR}/cmake/box2d_shim")  # no Python here
      target_compile_options(box2d_limit_${_class} PRIVATE $<$<CONFIG:Release>:-O3> -ffp-contract=off)
    endforeach()
  endif()
endif()
