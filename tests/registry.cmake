# SPDX-License-Identifier: Apache-2.0
# Registry tests: test plugins, each case in its own folder plugins-<case>/ under
# this build folder (never the real plugin folder, never installed), and
# test_registry, which points WEFT_PLUGIN_PATH at them and runs weft-info.

set(RT_SRC ${CMAKE_CURRENT_SOURCE_DIR}/plugins)
set(RT_TARGETS "")

# rt_plugin(<name> <case> SOURCES ... [FILE <file stem>] [DEFS ...] [INCLUDES ...])
macro(rt_plugin name case)
  cmake_parse_arguments(RTP "" "FILE" "SOURCES;DEFS;INCLUDES" ${ARGN})
  weft_add_plugin(${name} SOURCES ${RTP_SOURCES} INCLUDES ${RTP_INCLUDES} NO_INSTALL)
  set_target_properties(weft-plugin-${name} PROPERTIES
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/plugins-${case})
  if(RTP_FILE)
    set_target_properties(weft-plugin-${name} PROPERTIES OUTPUT_NAME weft-${RTP_FILE})
  endif()
  if(RTP_DEFS)
    target_compile_definitions(weft-plugin-${name} PRIVATE ${RTP_DEFS})
  endif()
  list(APPEND RT_TARGETS weft-plugin-${name})
endmacro()

rt_plugin(rt-good good SOURCES ${RT_SRC}/rt_transport.c
  DEFS RT_NAME="rt-good" RT_DESCRIBE="rt-good-describe" RT_WITH_ALGO)
rt_plugin(rt-unresolved unresolved SOURCES ${RT_SRC}/rt_unresolved.c)
# weft_add_plugin links with -z defs; this one must link with a hole in it.
target_link_options(weft-plugin-rt-unresolved PRIVATE -Wl,-z,undefs)
rt_plugin(rt-noinit noinit SOURCES ${RT_SRC}/rt_noinit.c)
rt_plugin(rt-initnull initnull SOURCES ${RT_SRC}/rt_transport.c DEFS RT_NAME="rt-initnull" RT_INIT_NULL)
rt_plugin(rt-abi1 abi1 SOURCES ${RT_SRC}/rt_transport.c DEFS RT_NAME="rt-abi1" RT_ABI_MAJOR=1 RT_ABI_MINOR=2)
rt_plugin(rt-dup-a dup SOURCES ${RT_SRC}/rt_transport.c DEFS RT_NAME="rt-dup" RT_DESCRIBE="rt-dup-a-describe")
rt_plugin(rt-dup-b dup SOURCES ${RT_SRC}/rt_transport.c DEFS RT_NAME="rt-dup" RT_DESCRIBE="rt-dup-b-describe")
rt_plugin(rt-shadow1 shadow1 FILE rt-shadow SOURCES ${RT_SRC}/rt_transport.c
  DEFS RT_NAME="rt-shadow" RT_DESCRIBE="rt-shadow1-describe")
rt_plugin(rt-shadow2 shadow2 FILE rt-shadow SOURCES ${RT_SRC}/rt_transport.c
  DEFS RT_NAME="rt-shadow" RT_DESCRIBE="rt-shadow2-describe")
rt_plugin(rt-shadow3 shadow3 FILE rt-shadow-alt SOURCES ${RT_SRC}/rt_transport.c
  DEFS RT_NAME="rt-shadow" RT_DESCRIBE="rt-shadow3-describe")
rt_plugin(rt-missingop missingop SOURCES ${RT_SRC}/rt_transport.c DEFS RT_NAME="rt-missingop" RT_NO_PUT)
rt_plugin(rt-newminor newminor SOURCES ${RT_SRC}/rt_transport.c
  DEFS RT_NAME="rt-newminor" RT_ABI_MINOR=99 RT_NEWER RT_DESCRIBE="rt-newminor-describe")
rt_plugin(rt-baddesc baddesc SOURCES ${RT_SRC}/rt_transport.c DEFS RT_NAME="rt-baddesc" RT_BAD_DESCS)
# Built against the frozen ABI 0.0 header, not include/weft/plugin.h.
rt_plugin(rt-old old SOURCES ${RT_SRC}/rt_old.c INCLUDES ${CMAKE_CURRENT_SOURCE_DIR}/abi)
target_compile_options(weft-plugin-rt-old PRIVATE -Wno-missing-prototypes) # the frozen header has none

weft_add_test(test_registry SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_registry.c LABELS unit TIMEOUT 120 LIBS m)
target_compile_definitions(test_registry PRIVATE
  RT_PLUGIN_BASE="${CMAKE_CURRENT_BINARY_DIR}"
  RT_INTREE_DIR="${WEFT_PLUGIN_BUILD_DIR}"
  RT_WEFT_INFO="$<TARGET_FILE:weft-info>")
add_dependencies(test_registry weft-info ${RT_TARGETS})
