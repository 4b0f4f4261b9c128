# SPDX-License-Identifier: Apache-2.0
# Transport choice and the creation-time consistency check (tests/test_select.c):
# forked ranks on 127.0.0.1 over shm, ofi, ucx and the fakefast test plugin,
# which is shm's data path with whatever properties its parameters declare;
# GPU links come from the WEFT_TEST_FAKE_NVML test hook.
# It lives in its own folder (plugins-select/), never the real plugin folder.
if(TARGET weft-plugin-shm AND TARGET weft-plugin-ofi AND TARGET weft-plugin-ucx)
  weft_add_plugin(sel-fakefast SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/plugins/sel_fakefast.c
    ${PROJECT_SOURCE_DIR}/plugins/shm/shm_mem.c ${PROJECT_SOURCE_DIR}/plugins/shm/shm_ep.c
    INCLUDES ${PROJECT_SOURCE_DIR}/plugins/shm NO_INSTALL)
  set_target_properties(weft-plugin-sel-fakefast PROPERTIES
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/plugins-select OUTPUT_NAME weft-fakefast)
  # For the consistency check of plugin builds: an identical copy of that file
  # in another folder (same build, must pass), and another build of the same
  # source that differs in one constant (must fail creation, naming both ids).
  add_custom_command(TARGET weft-plugin-sel-fakefast POST_BUILD
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/plugins-select-copy
    COMMAND ${CMAKE_COMMAND} -E copy $<TARGET_FILE:weft-plugin-sel-fakefast>
      ${CMAKE_CURRENT_BINARY_DIR}/plugins-select-copy/)
  weft_add_plugin(sel-fakefast-b SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/plugins/sel_fakefast.c
    ${PROJECT_SOURCE_DIR}/plugins/shm/shm_mem.c ${PROJECT_SOURCE_DIR}/plugins/shm/shm_ep.c
    INCLUDES ${PROJECT_SOURCE_DIR}/plugins/shm NO_INSTALL)
  target_compile_definitions(weft-plugin-sel-fakefast-b PRIVATE FF_VARIANT=1)
  set_target_properties(weft-plugin-sel-fakefast-b PROPERTIES
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/plugins-select-b OUTPUT_NAME weft-fakefast)
  weft_add_test(test_select SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_select.c LABELS mp TIMEOUT 300
    ENV WEFT_PLUGIN_PATH=${CMAKE_CURRENT_BINARY_DIR}/plugins-select)
  target_compile_definitions(test_select PRIVATE TS_WEFT_INFO="$<TARGET_FILE:weft-info>"
    TS_PLUGINS_COPY="${CMAKE_CURRENT_BINARY_DIR}/plugins-select-copy"
    TS_PLUGINS_B="${CMAKE_CURRENT_BINARY_DIR}/plugins-select-b")
  if(WEFT_HAVE_HWLOC)
    target_compile_definitions(test_select PRIVATE TS_HWLOC=1)
  endif()
  add_dependencies(test_select weft-info weft-plugin-sel-fakefast weft-plugin-sel-fakefast-b weft-plugin-shm
    weft-plugin-ofi weft-plugin-ucx weft-plugin-algo-host)
endif()
