# SPDX-License-Identifier: Apache-2.0
# The ofi transport, tested at plugin level: the test dlopens the built plugin
# and drives forked ranks over shm and tcp on 127.0.0.1.
if(TARGET weft-plugin-ofi)
  weft_add_test(test_ofi SOURCES test_ofi.c tp_harness.c LABELS mp TIMEOUT 600 LIBS ${CMAKE_DL_LIBS})
  target_compile_definitions(test_ofi PRIVATE WEFT_OFI_PLUGIN_PATH="$<TARGET_FILE:weft-plugin-ofi>")
  add_dependencies(test_ofi weft-plugin-ofi)
endif()
# Device memory (FI_HMEM): the plugin's sources (weft-ofi-testable) driven
# through a provider double that grants FI_HMEM on the real shm and tcp.
if(TARGET weft-ofi-testable)
  weft_add_test(test_ofi_mem SOURCES test_ofi_mem.c tp_harness.c LABELS unit TIMEOUT 120 LIBS weft-ofi-testable)
endif()
