# SPDX-License-Identifier: Apache-2.0
# The examples/ folder, checked the way a user would use it. This file is both
# included by tests/CMakeLists.txt (registering the tests) and run by ctest in
# script mode (cmake -P) to perform them.
#
# example_plugin_skeleton: builds examples/plugin-skeleton as a standalone project
# against the tree's include folder, checks that it exports only
# weft_plugin_init, that weft-info lists it as a loaded transport when
# WEFT_PLUGIN_PATH points at it, and that its parameter (WEFT_SKELETON_ENABLE=0)
# makes it decline to load.
#
# test_examples (test_examples.c): two ranks of one process connect through the
# skeleton built above and move data with put/signal/flush; disabled, naming it
# in weft_connect fails with -WEFT_ERR_PLUGIN.

if(NOT CMAKE_SCRIPT_MODE_FILE)
  if(TARGET weft-info)
    add_test(NAME example_plugin_skeleton
      COMMAND ${CMAKE_COMMAND}
        -DSRC=${PROJECT_SOURCE_DIR}/examples/plugin-skeleton
        -DINC=${PROJECT_SOURCE_DIR}/include
        -DWORK=${CMAKE_CURRENT_BINARY_DIR}/example-plugin-skeleton
        -DWEFT_INFO=$<TARGET_FILE:weft-info>
        -DCC=${CMAKE_C_COMPILER}
        -DNM=${CMAKE_NM}
        -P ${CMAKE_CURRENT_LIST_FILE})
    set_tests_properties(example_plugin_skeleton PROPERTIES
      LABELS "unit;example" TIMEOUT 300
      ENVIRONMENT "WEFT_CONFIG=${CMAKE_CURRENT_BINARY_DIR}/empty.conf;WEFT_PLUGIN_PATH="
      FIXTURES_SETUP skeleton_built)
    weft_add_test(test_examples SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_examples.c LABELS mp TIMEOUT 120
      ENV WEFT_TEST_SKELETON_DIR=${CMAKE_CURRENT_BINARY_DIR}/example-plugin-skeleton)
    set_tests_properties(test_examples PROPERTIES FIXTURES_REQUIRED skeleton_built)
  else()
    message(STATUS "weft: example_plugin_skeleton not registered: no weft-info target")
  endif()
  return()
endif()

# ---- script mode: the test itself

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK})
run("configuring examples/plugin-skeleton" ${CMAKE_COMMAND} -S ${SRC} -B ${WORK}
  -DWEFT_INCLUDE_DIR=${INC} -DCMAKE_C_COMPILER=${CC} "-DCMAKE_C_FLAGS=-Werror")
run("building examples/plugin-skeleton" ${CMAKE_COMMAND} --build ${WORK})
set(so ${WORK}/libweft-skeleton.so)
if(NOT EXISTS ${so})
  message(FATAL_ERROR "the build made no ${so}")
endif()

# Exactly one exported symbol.
run("nm" ${NM} -D --defined-only ${so})
string(REGEX MATCHALL "[^\n]+" lines "${out}")
set(exported "")
foreach(l IN LISTS lines)
  if(l MATCHES " [A-Za-z] ([^ ]+)$")
    list(APPEND exported ${CMAKE_MATCH_1})
  endif()
endforeach()
if(NOT exported STREQUAL "weft_plugin_init")
  message(FATAL_ERROR "libweft-skeleton.so must export only weft_plugin_init; it exports: ${exported}")
endif()

# weft-info finds and loads it through WEFT_PLUGIN_PATH.
run("weft-info" ${CMAKE_COMMAND} -E env WEFT_PLUGIN_PATH=${WORK} ${WEFT_INFO})
string(REPLACE "." "\\." so_re "${so}")
if(NOT out MATCHES "search path: ${WORK}")
  message(FATAL_ERROR "weft-info does not search WEFT_PLUGIN_PATH=${WORK} first:\n${out}")
endif()
if(NOT out MATCHES "\n +skeleton +transport +ABI [0-9]+\\.[0-9]+ +${so_re}\n")
  message(FATAL_ERROR "weft-info does not list the skeleton as a loaded transport from ${so}:\n${out}\n${err}")
endif()
if(NOT out MATCHES "memcpy between ranks of one process")
  message(FATAL_ERROR "weft-info does not show the skeleton's describe line:\n${out}")
endif()

# Its parameter is resolved from the environment: disabled, it declines to load.
execute_process(COMMAND ${CMAKE_COMMAND} -E env WEFT_PLUGIN_PATH=${WORK} WEFT_SKELETON_ENABLE=0 ${WEFT_INFO}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(out MATCHES "\n +skeleton +transport")
  message(FATAL_ERROR "WEFT_SKELETON_ENABLE=0 did not stop the skeleton from loading:\n${out}")
endif()
if(NOT out MATCHES "REJECTED ${so_re}[^\n]*declined")
  message(FATAL_ERROR "with WEFT_SKELETON_ENABLE=0 weft-info should list the skeleton as declined:\n${out}\n${err}")
endif()
message(STATUS "skeleton plugin: built, exports only weft_plugin_init, loaded by weft-info, parameter honoured")
