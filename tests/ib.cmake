# SPDX-License-Identifier: Apache-2.0
# The ib (verbs) transport. test_ib links the plugin's sources (weft-ib-testable)
# and drives them through a verbs double, so it runs without RDMA hardware; it
# also runs build/bin/weft-info against the built module.
if(TARGET weft-plugin-ib)
  weft_add_test(test_ib SOURCES test_ib.c tp_harness.c LABELS unit TIMEOUT 120 LIBS weft-ib-testable ${CMAKE_DL_LIBS})
  target_compile_definitions(test_ib PRIVATE
    WEFT_INFO_BIN="$<TARGET_FILE:weft-info>"
    WEFT_IB_PLUGIN_DIR="$<TARGET_FILE_DIR:weft-plugin-ib>")
  add_dependencies(test_ib weft-info weft-plugin-ib)

  # Conformance over real verbs devices. Without one, ib does not open
  # (-WEFT_ERR_NO_DEVICE), weft_connect(..., "ib") answers -WEFT_ERR_PLUGIN
  # and the conformance binary exits 77: skipped.
  weft_add_test(test_conformance_ib_np2 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/conformance.c
    LABELS mp TIMEOUT 110 ENV WEFT_TEST_TRANSPORT=ib WEFT_TEST_NRANKS=2)
  add_dependencies(test_conformance_ib_np2 weft-plugin-ib)
endif()
