# Fetching a source distribution from PyPI at build time, for native code whose sources never
# enter this repository (ALE: GPL-2.0-only; Box2D: the copy gymnasium's envs step).
#
# aiopool_fetch_sdist(<dist> <version> <sha256> <unpacked dir name> <marker> <out_dir> <out_why>)
# unpacks <dist>==<version> under the build tree and sets <out_dir> to the unpacked folder (one
# that holds <marker>); on failure it leaves <out_dir> empty and sets <out_why> to pip's reason.
function(aiopool_fetch_sdist dist version sha256 unpacked marker out_dir out_why)
  set(_dir "${CMAKE_BINARY_DIR}/_sdists/${dist}")
  set(_src "${_dir}/${unpacked}")
  set(${out_dir} "" PARENT_SCOPE)
  if(EXISTS "${_src}/${marker}")
    set(${out_dir} "${_src}" PARENT_SCOPE)
    return()
  endif()
  message(STATUS "aiopool: fetching the ${dist}==${version} sdist with pip")
  # --no-build-isolation: pip prepares the sdist's metadata, and its own build requirements may
  # be heavy (ale-py's include jax); in our build env the metadata hook needs what we have.
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -m pip download --no-deps --no-binary :all: --no-build-isolation
            --quiet "${dist}==${version}" -d "${_dir}"
    RESULT_VARIABLE _rc ERROR_VARIABLE _err OUTPUT_QUIET)
  file(GLOB _tars "${_dir}/*.tar.gz")
  if(NOT _rc EQUAL 0 OR NOT _tars)
    string(REGEX MATCH "ERROR:[^\n]*" _first_error "${_err}")  # pip's reason, without its warnings
    if(_first_error)
      set(_err "${_first_error}")
    endif()
    string(STRIP "${_err}" _err)
    set(${out_why} "pip download ${dist}==${version} failed: ${_err}" PARENT_SCOPE)
    return()
  endif()
  list(GET _tars 0 _tar)
  file(SHA256 "${_tar}" _sha)
  if(NOT _sha STREQUAL sha256)
    set(${out_why} "${_tar} has sha256 ${_sha}, expected ${sha256}" PARENT_SCOPE)
    return()
  endif()
  file(ARCHIVE_EXTRACT INPUT "${_tar}" DESTINATION "${_dir}")
  if(NOT EXISTS "${_src}/${marker}")
    set(${out_why} "${_tar} holds no ${unpacked}/${marker}" PARENT_SCOPE)
    return()
  endif()
  set(${out_dir} "${_src}" PARENT_SCOPE)
endfunction()

# aiopool_sdist_source(<dist> <version> <sha256> <unpacked dir name> <marker> <var> <out_why>)
# sets <var> to the unpacked sdist: the folder the user passed as -D<var>=... (checked for
# <marker>), else one fetched with aiopool_fetch_sdist; empty, with <out_why> set, if neither.
function(aiopool_sdist_source dist version sha256 unpacked marker var out_why)
  set(${out_why} "" PARENT_SCOPE)
  if(${var})
    if(NOT EXISTS "${${var}}/${marker}")
      set(${out_why} "${var}=${${var}} is not an unpacked ${dist} sdist (it has no ${marker})"
          PARENT_SCOPE)
      set(${var} "" PARENT_SCOPE)
    endif()
    return()
  endif()
  aiopool_fetch_sdist(${dist} ${version} ${sha256} ${unpacked} ${marker} _dir _why)
  set(${var} "${_dir}" PARENT_SCOPE)
  set(${out_why} "${_why}" PARENT_SCOPE)
endfunction()
