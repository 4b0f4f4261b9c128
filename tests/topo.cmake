# SPDX-License-Identifier: Apache-2.0
# weft-info --topo and --select (tests/test_topo.c): what the topology and the
# transport choice look like to a user, with the real plugins of this build.
if(TARGET weft-plugin-shm AND TARGET weft-plugin-ofi AND TARGET weft-plugin-ucx)
  # The fakefast test plugin (select.cmake) shows a device with a declared NUMA node.
  weft_add_test(test_topo SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_topo.c LABELS unit TIMEOUT 60
    ENV WEFT_PLUGIN_PATH=${CMAKE_CURRENT_BINARY_DIR}/plugins-select)
  target_compile_definitions(test_topo PRIVATE TT_WEFT_INFO="$<TARGET_FILE:weft-info>"
    TT_TWO_NUMA="${CMAKE_CURRENT_SOURCE_DIR}/topo_two_numa.xml")
  if(WEFT_HAVE_HWLOC)
    target_compile_definitions(test_topo PRIVATE TT_HWLOC=1)
  endif()
  add_dependencies(test_topo weft-info weft-plugin-sel-fakefast weft-plugin-shm weft-plugin-ofi weft-plugin-ucx)
endif()
