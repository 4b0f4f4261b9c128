# SPDX-License-Identifier: Apache-2.0
# The transport conformance suite (tests/conformance.c, built by
# conformance.cmake) run over the shm transport with 2, 3 and 4 ranks.
if(TARGET weft-plugin-shm)
  foreach(np 2 3 4)
    weft_add_test(test_conformance_shm_np${np} SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/conformance.c
      LABELS mp TIMEOUT 110 ENV WEFT_TEST_TRANSPORT=shm WEFT_TEST_NRANKS=${np})
  endforeach()
endif()
