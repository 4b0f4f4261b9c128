# SPDX-License-Identifier: Apache-2.0
# include/weft/kit.h, the plugin author's support kit: test_kit covers its
# reductions, conversions, codecs, parameter binding and error names.
# tools/check-kit.sh: no plugin of the tree keeps its own codec, error-name
# table or parameter getter (check_kit_plugins), and the script does find
# one: a fake plugin folder with a codec fails it, naming the file and line
# (check_kit_finds_codec). This file is included by tests/CMakeLists.txt and
# run by ctest in script mode (cmake -P) for the second test.
if(NOT CMAKE_SCRIPT_MODE_FILE)
  weft_add_test(test_kit SOURCES test_kit.c LABELS unit TIMEOUT 120 LIBS m)
  add_test(NAME check_kit_plugins COMMAND ${PROJECT_SOURCE_DIR}/tools/check-kit.sh ${PROJECT_SOURCE_DIR}/plugins)
  add_test(NAME check_kit_finds_codec
    COMMAND ${CMAKE_COMMAND} -DSCRIPT=${PROJECT_SOURCE_DIR}/tools/check-kit.sh
      -DWORK=${CMAKE_CURRENT_BINARY_DIR}/kit-fake -P ${CMAKE_CURRENT_LIST_FILE})
  set_tests_properties(check_kit_plugins check_kit_finds_codec PROPERTIES LABELS unit TIMEOUT 60)
  return()
endif()

file(REMOVE_RECURSE ${WORK})
file(WRITE ${WORK}/fake/fake.h "#include <stdint.h>\n\n/* A wire codec of its own. */\nstatic inline uint32_t fk_get_u32(const unsigned char *p)\n{\n\treturn (uint32_t)p[0] | ((uint32_t)p[1] << 8);\n}\n")
file(WRITE ${WORK}/fake/fake.c "#include <weft/kit.h>\n\nint fk_ok(const unsigned char *p);\nint fk_ok(const unsigned char *p)\n{\n\treturn (int)weft_kit_le_get32(p);\n}\n")
execute_process(COMMAND ${SCRIPT} ${WORK} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "check-kit.sh exited ${rc} on a plugin with its own codec:\n${out}${err}")
endif()
if(NOT out MATCHES "fake/fake.h:4:")
  message(FATAL_ERROR "check-kit.sh did not name fake/fake.h:4, the codec's line:\n${out}")
endif()
if(out MATCHES "fake.c")
  message(FATAL_ERROR "check-kit.sh blamed fake.c, which uses the kit:\n${out}")
endif()
# An error-name table and a getter of its own are found as well.
file(WRITE ${WORK}/fake/fake.h "#include <weft/plugin.h>\n")
file(WRITE ${WORK}/fake/names.c "static const char *const own[] = {\"plugin\", \"ABI\"};\nconst char *fk_name(int rc)\n{\n\treturn own[-rc - WEFT_ERR_FIRST];\n}\n")
file(WRITE ${WORK}/fake/params.c "static int get_int(const char *key, int64_t *v)\n{\n\treturn core->param_get(core->self, \"fake\", key, WEFT_PARAM_INT, v, NULL);\n}\n")
execute_process(COMMAND ${SCRIPT} ${WORK} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 1 OR NOT out MATCHES "fake/names.c:4:" OR NOT out MATCHES "fake/params.c:3:")
  message(FATAL_ERROR "check-kit.sh (exit ${rc}) missed an error-name table or a getter:\n${out}${err}")
endif()
# With only kit calls left the folder passes.
file(REMOVE ${WORK}/fake/names.c ${WORK}/fake/params.c)
execute_process(COMMAND ${SCRIPT} ${WORK} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "check-kit.sh exited ${rc} on a folder that only uses the kit:\n${out}${err}")
endif()
message(STATUS "check-kit.sh: found the codec, the name table and the getter, and nothing once they were gone")
