# The build requirements' files the build reads, staged into the build tree.
#
# pip's build isolation installs nanobind, numpy, mujoco and jaxlib into a new temporary folder
# at every `pip install`. Compile lines that named that folder would change at every install,
# and ninja would rebuild every module (~2 min on 2 cores) although nothing changed. So their
# headers, nanobind's sources and the libraries linked are copied into the build tree, each file
# only where its content differs from the copy there, and the build reads the copies: a second
# `pip install -e .` compiles only what changed.

# aiopool_stage(<name> <path> <out_var>): copies <path> (a folder, or one file) to
# <build dir>/_staged/<name> and sets <out_var> to the copy.
function(aiopool_stage name path out_var)
  set(_dst "${CMAKE_BINARY_DIR}/_staged/${name}")
  if(NOT IS_DIRECTORY "${path}")
    get_filename_component(_file "${path}" NAME)
    file(MAKE_DIRECTORY "${_dst}")
    file(COPY_FILE "${path}" "${_dst}/${_file}" ONLY_IF_DIFFERENT)
    set(${out_var} "${_dst}/${_file}" PARENT_SCOPE)
    return()
  endif()
  file(GLOB_RECURSE _files LIST_DIRECTORIES false RELATIVE "${path}" "${path}/*")
  foreach(_f IN LISTS _files)
    if(_f MATCHES "(^|/)__pycache__/")
      continue()
    endif()
    get_filename_component(_dir "${_dst}/${_f}" DIRECTORY)
    file(MAKE_DIRECTORY "${_dir}")
    file(COPY_FILE "${path}/${_f}" "${_dst}/${_f}" ONLY_IF_DIFFERENT)
  endforeach()
  set(${out_var} "${_dst}" PARENT_SCOPE)
endfunction()

# aiopool_python_path(<out_var> <code>): what <code> prints in the build's Python, or a fatal
# error saying what is missing.
function(aiopool_python_path out_var code what)
  execute_process(COMMAND "${Python_EXECUTABLE}" -c "${code}" OUTPUT_VARIABLE _out
                  OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0 OR NOT EXISTS "${_out}")
    message(FATAL_ERROR "aiopool's build needs ${what}: ${_err}")
  endif()
  set(${out_var} "${_out}" PARENT_SCOPE)
endfunction()
