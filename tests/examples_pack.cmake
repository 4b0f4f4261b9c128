# SPDX-License-Identifier: Apache-2.0
# examples/pack-skeleton, checked the way a pack author would use it. This file
# is both included by tests/CMakeLists.txt (registering the tests) and run by
# ctest in script mode (cmake -P) to perform them, as tests/examples.cmake is
# for the transport skeleton.
#
# example_pack_skeleton: builds examples/pack-skeleton as a standalone project
# against the tree's include folder with -Werror, checks that it exports only
# weft_plugin_init, that weft-info lists it as a loaded algorithm pack when
# WEFT_PLUGIN_PATH points at it, that an [algorithm] rule hands it allreduce
# and allgather while without one the tree's packs keep them (priority 0), and
# that its parameter (WEFT_SKELPACK_ENABLE=0) makes it decline to load.
#
# test_examples_pack (test_examples_pack.c): forked ranks (2, 3, 4) run
# allreduce of every type and operation and allgather through the skeleton
# built above, in place and out of place, checked against a reference.
#
# pack_steps (tools/pack-steps.sh): the README's "Writing an algorithm pack"
# steps, run as a script: copy, rename, build, weft-info, weft-perf through an
# [algorithm] rule at 2, 3, 4 and 8 ranks.

if(NOT CMAKE_SCRIPT_MODE_FILE)
  if(TARGET weft-info AND TARGET weft-plugin-algo-host AND TARGET weft-plugin-shm)
    add_test(NAME example_pack_skeleton
      COMMAND ${CMAKE_COMMAND}
        -DSRC=${PROJECT_SOURCE_DIR}/examples/pack-skeleton
        -DINC=${PROJECT_SOURCE_DIR}/include
        -DWORK=${CMAKE_CURRENT_BINARY_DIR}/example-pack-skeleton
        -DWEFT_INFO=$<TARGET_FILE:weft-info>
        -DCC=${CMAKE_C_COMPILER}
        -DNM=${CMAKE_NM}
        -P ${CMAKE_CURRENT_LIST_FILE})
    set_tests_properties(example_pack_skeleton PROPERTIES
      LABELS "unit;example" TIMEOUT 300
      ENVIRONMENT "WEFT_CONFIG=${CMAKE_CURRENT_BINARY_DIR}/empty.conf;WEFT_PLUGIN_PATH="
      FIXTURES_SETUP pack_skeleton_built)
    weft_add_test(test_examples_pack SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_examples_pack.c LABELS "mp;example"
      TIMEOUT 300 ENV WEFT_TEST_PACK_SKELETON_DIR=${CMAKE_CURRENT_BINARY_DIR}/example-pack-skeleton)
    set_tests_properties(test_examples_pack PROPERTIES FIXTURES_REQUIRED pack_skeleton_built)
    add_dependencies(test_examples_pack weft-plugin-algo-host weft-plugin-shm)
    if(TARGET weft-perf)
      find_program(WEFT_BASH bash)
      if(WEFT_BASH)
        add_test(NAME pack_steps
          COMMAND ${WEFT_BASH} ${PROJECT_SOURCE_DIR}/tools/pack-steps.sh
            --bin $<TARGET_FILE_DIR:weft-info> --cc ${CMAKE_C_COMPILER}
            --work ${CMAKE_CURRENT_BINARY_DIR}/pack-steps)
        set_tests_properties(pack_steps PROPERTIES LABELS "mp;example" TIMEOUT 600
          ENVIRONMENT "WEFT_CONFIG=${CMAKE_CURRENT_BINARY_DIR}/empty.conf;WEFT_PLUGIN_PATH=")
      endif()
    endif()
  else()
    message(STATUS "weft: example_pack_skeleton not registered: no weft-info, algo-host or shm target")
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
# No build type given: the example's own default (Release) is what is checked.
run("configuring examples/pack-skeleton" ${CMAKE_COMMAND} -S ${SRC} -B ${WORK}
  -DWEFT_INCLUDE_DIR=${INC} -DCMAKE_C_COMPILER=${CC}
  "-DCMAKE_C_FLAGS=-Werror -Wshadow -Wmissing-prototypes -Wstrict-prototypes")
run("building examples/pack-skeleton" ${CMAKE_COMMAND} --build ${WORK})
set(so ${WORK}/libweft-skelpack.so)
if(NOT EXISTS ${so})
  message(FATAL_ERROR "the build made no ${so}")
endif()
file(STRINGS ${WORK}/CMakeCache.txt build_type REGEX "^CMAKE_BUILD_TYPE:")
if(NOT build_type MATCHES "=Release$")
  message(FATAL_ERROR "examples/pack-skeleton should build Release by default; its cache says ${build_type}")
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
  message(FATAL_ERROR "libweft-skelpack.so must export only weft_plugin_init; it exports: ${exported}")
endif()

# weft-info finds and loads it through WEFT_PLUGIN_PATH.
run("weft-info" ${CMAKE_COMMAND} -E env WEFT_PLUGIN_PATH=${WORK} ${WEFT_INFO})
string(REPLACE "." "\\." so_re "${so}")
if(NOT out MATCHES "search path: ${WORK}")
  message(FATAL_ERROR "weft-info does not search WEFT_PLUGIN_PATH=${WORK} first:\n${out}")
endif()
if(NOT out MATCHES "\n +skelpack +algorithm +ABI [0-9]+\\.[0-9]+ +${so_re}\n")
  message(FATAL_ERROR "weft-info does not list the skeleton as a loaded algorithm pack from ${so}:\n${out}\n${err}")
endif()

# Priority 0: on the search path alone it takes nothing from the tree's packs;
# an [algorithm] rule hands it both collectives.
run("weft-info --select" ${CMAKE_COMMAND} -E env WEFT_PLUGIN_PATH=${WORK} ${WEFT_INFO} --select --np 3)
if(out MATCHES "skelpack/")
  message(FATAL_ERROR "without a rule the skeleton should serve nothing:\n${out}")
endif()
file(WRITE ${WORK}/rules.conf "[algorithm]\nrequire skelpack/allreduce when coll=allreduce\n"
  "require skelpack/allgather when coll=allgather\n")
run("weft-info --select with rules" ${CMAKE_COMMAND} -E env WEFT_PLUGIN_PATH=${WORK} WEFT_CONFIG=${WORK}/rules.conf
  ${WEFT_INFO} --select --np 3)
foreach(c allreduce allgather)
  if(NOT out MATCHES "  ${c}:\n +1 B \\.\\. [^\n]* skelpack/${c} +\\(rule [^\n]*rules\\.conf:[0-9]+\\)")
    message(FATAL_ERROR "with the rules, skelpack/${c} should serve every ${c}:\n${out}")
  endif()
endforeach()

# Its parameter is resolved from the environment: disabled, it declines to load.
execute_process(COMMAND ${CMAKE_COMMAND} -E env WEFT_PLUGIN_PATH=${WORK} WEFT_SKELPACK_ENABLE=0 ${WEFT_INFO}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(out MATCHES "\n +skelpack +algorithm")
  message(FATAL_ERROR "WEFT_SKELPACK_ENABLE=0 did not stop the skeleton from loading:\n${out}")
endif()
if(NOT out MATCHES "REJECTED ${so_re}[^\n]*declined")
  message(FATAL_ERROR "with WEFT_SKELPACK_ENABLE=0 weft-info should list the skeleton as declined:\n${out}\n${err}")
endif()
message(STATUS "pack skeleton: built, exports only weft_plugin_init, loaded by weft-info, selected by rules, "
  "parameter honoured")
