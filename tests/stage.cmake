# SPDX-License-Identifier: Apache-2.0
# Staging of device data through host memory (core/stage.c), by order: forked
# ranks over shm with the stagefake stand-in (tests/plugins/stage_fake.c),
# built into its own folder, never the real plugin folder.
if(TARGET weft-plugin-shm AND WEFT_TEST_HOOKS)
  weft_add_plugin(stagefake SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/plugins/stage_fake.c
    INCLUDES ${PROJECT_SOURCE_DIR}/core LIBS Threads::Threads NO_INSTALL)
  set_target_properties(weft-plugin-stagefake PROPERTIES
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/plugins-stage)
  weft_add_test(test_stage SOURCES test_stage.c LABELS mp TIMEOUT 120)
  target_compile_definitions(test_stage PRIVATE WEFT_STAGEFAKE_PLUGIN_DIR="$<TARGET_FILE_DIR:weft-plugin-stagefake>")
  add_dependencies(test_stage weft-plugin-shm weft-plugin-stagefake)
endif()
