# SPDX-License-Identifier: Apache-2.0
# tools/check-layers.sh: core/'s module graph has no loop (check_layers_core),
# and the script does find one: a two-module loop in a scratch folder fails
# it, naming both (check_layers_finds_loop). This file is included by
# tests/CMakeLists.txt and run by ctest in script mode (cmake -P) for the
# second test.
if(NOT CMAKE_SCRIPT_MODE_FILE)
  add_test(NAME check_layers_core COMMAND ${PROJECT_SOURCE_DIR}/tools/check-layers.sh ${PROJECT_SOURCE_DIR}/core)
  add_test(NAME check_layers_finds_loop
    COMMAND ${CMAKE_COMMAND} -DSCRIPT=${PROJECT_SOURCE_DIR}/tools/check-layers.sh
      -DWORK=${CMAKE_CURRENT_BINARY_DIR}/layers-loop -P ${CMAKE_CURRENT_LIST_FILE})
  set_tests_properties(check_layers_core check_layers_finds_loop PROPERTIES LABELS unit TIMEOUT 60)
  return()
endif()

file(REMOVE_RECURSE ${WORK})
file(WRITE ${WORK}/alpha.c "#include \"alpha.h\"\n")
file(WRITE ${WORK}/alpha.h "#include \"beta.h\"\n")
file(WRITE ${WORK}/beta.c "#include \"beta.h\"\n#include \"gamma.h\"\n")
file(WRITE ${WORK}/beta.h "#include <stdio.h>\n")
file(WRITE ${WORK}/gamma.h "#include \"alpha.h\"\n")
execute_process(COMMAND ${SCRIPT} ${WORK} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "check-layers.sh exited ${rc} on a loop alpha -> beta -> gamma -> alpha:\n${out}${err}")
endif()
foreach(m alpha beta gamma)
  if(NOT out MATCHES "\n  ${m}\n")
    message(FATAL_ERROR "check-layers.sh did not name ${m} in the loop:\n${out}")
  endif()
endforeach()
# Without the closing edge the same folder is a ladder.
file(WRITE ${WORK}/gamma.h "#include <stdint.h>\n")
execute_process(COMMAND ${SCRIPT} ${WORK} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "check-layers.sh exited ${rc} on a folder without a loop:\n${out}${err}")
endif()
message(STATUS "check-layers.sh: found the loop alpha -> beta -> gamma, and none once it was broken")
