# Transport choice and the creation-time consistency check (tests/test_select.c):
# forked ranks on 127.0.0.1 over shm, ofi, ucx and the fakefast test plugin,
# which is shm's data path with whatever properties its parameters declare.
# It lives in its own folder (plugins-select/), never the real plugin folder.
if(TARGET weft-plugin-shm AND TARGET weft-plugin-ofi AND TARGET weft-plugin-ucx)
  weft_add_plugin(sel-fakefast SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/plugins/sel_fakefast.c
    ${PROJECT_SOURCE_DIR}/plugins/shm/shm_mem.c ${PROJECT_SOURCE_DIR}/plugins/shm/shm_ep.c
    INCLUDES ${PROJECT_SOURCE_DIR}/plugins/shm NO_INSTALL)
  set_target_properties(weft-plugin-sel-fakefast PROPERTIES
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/plugins-select OUTPUT_NAME weft-fakefast)
  weft_add_test(test_select SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_select.c LABELS mp TIMEOUT 300
    ENV WEFT_PLUGIN_PATH=${CMAKE_CURRENT_BINARY_DIR}/plugins-select)
  target_compile_definitions(test_select PRIVATE TS_WEFT_INFO="$<TARGET_FILE:weft-info>")
  if(WEFT_HAVE_HWLOC)
    target_compile_definitions(test_select PRIVATE TS_HWLOC=1)
  endif()
  add_dependencies(test_select weft-info weft-plugin-sel-fakefast weft-plugin-shm weft-plugin-ofi weft-plugin-ucx
    weft-plugin-algo-host)
endif()
