# SPDX-License-Identifier: Apache-2.0
# The ucx transport, tested at plugin level: the test dlopens the built plugin
# and drives forked ranks over UCX's tcp (on loopback) and shared memory.
if(TARGET weft-plugin-ucx)
  weft_add_test(test_ucx SOURCES test_ucx.c tp_harness.c LABELS mp TIMEOUT 900 LIBS ${CMAKE_DL_LIBS})
  target_compile_definitions(test_ucx PRIVATE WEFT_UCX_PLUGIN_PATH="$<TARGET_FILE:weft-plugin-ucx>")
  add_dependencies(test_ucx weft-plugin-ucx)
endif()
