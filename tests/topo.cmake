# weft-info --topo and --select (tests/test_topo.c): what the topology and the
# transport choice look like to a user, with the real plugins of this build.
if(TARGET weft-plugin-shm AND TARGET weft-plugin-ofi AND TARGET weft-plugin-ucx)
  weft_add_test(test_topo SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_topo.c LABELS unit TIMEOUT 60)
  target_compile_definitions(test_topo PRIVATE TT_WEFT_INFO="$<TARGET_FILE:weft-info>")
  if(HWLOC_FOUND)
    target_compile_definitions(test_topo PRIVATE TT_HWLOC=1)
  endif()
  add_dependencies(test_topo weft-info weft-plugin-shm weft-plugin-ofi weft-plugin-ucx)
endif()
