# SPDX-License-Identifier: Apache-2.0
# The transport conformance suite (tests/conformance.c, built by
# conformance.cmake) run over the ucx transport with 2, 3 and 4 ranks. UCX's
# tcp is pinned to loopback (net_devices=lo); same-host ranks use its shared
# memory, with the plugin watching peer processes (error_mode auto).
if(TARGET weft-plugin-ucx)
  foreach(np 2 3 4)
    weft_add_test(test_conformance_ucx_np${np} SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/conformance.c
      LABELS mp TIMEOUT 110 ENV WEFT_TEST_TRANSPORT=ucx WEFT_TEST_NRANKS=${np} WEFT_UCX_NET_DEVICES=lo)
  endforeach()
endif()
