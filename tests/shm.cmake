# SPDX-License-Identifier: Apache-2.0
# The shm transport, tested at plugin level: the test dlopens the built plugin
# and drives forked ranks over its mapped-segment and CMA paths.
if(TARGET weft-plugin-shm)
  weft_add_test(test_shm SOURCES test_shm.c tp_harness.c LABELS mp TIMEOUT 300 LIBS ${CMAKE_DL_LIBS})
  target_compile_definitions(test_shm PRIVATE WEFT_SHM_PLUGIN_PATH="$<TARGET_FILE:weft-plugin-shm>")
  add_dependencies(test_shm weft-plugin-shm)
endif()
