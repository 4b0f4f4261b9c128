# SPDX-License-Identifier: Apache-2.0
# The transport conformance suite (tests/conformance.c) run with the transport
# chosen by a [transport] rule instead of named by the suite: conformance.c's
# weft_connect calls go through tests/select_conn_shim.c, which passes NULL for
# the transport under test, and the suite checks that every connection is
# carried by that transport. A config requiring ucx, and one requiring ofi,
# each with 3 ranks on 127.0.0.1 (same-host peers, which shm would win on
# score without the rule).
add_library(weft-test-select-shim STATIC ${CMAKE_CURRENT_SOURCE_DIR}/select_conn_shim.c)
target_link_libraries(weft-test-select-shim PUBLIC weft)
foreach(tp ucx ofi)
  if(TARGET weft-plugin-${tp})
    file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/require-${tp}.conf "[transport]\nrequire ${tp}\n")
    weft_add_test(test_conformance_require_${tp}_np3 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/conformance.c
      LABELS mp TIMEOUT 110 LIBS weft-test-select-shim
      ENV WEFT_CONFIG=${CMAKE_CURRENT_BINARY_DIR}/require-${tp}.conf WEFT_TEST_TRANSPORT=${tp}
          WEFT_TEST_NRANKS=3 WEFT_UCX_NET_DEVICES=lo)
    target_compile_definitions(test_conformance_require_${tp}_np3 PRIVATE weft_connect=wt_select_connect)
  endif()
endforeach()

# With no config, the two network-namespace "hosts" of tests/test_netns.c
# (root only; skips otherwise) get a network transport chosen by the core:
# ofi and ucx declare no figures for other hosts, so they tie on score and ofi
# wins on name; shm declares it cannot reach them. The suite then checks that
# libfabric's tcp provider carried the data over the veth.
if(TARGET weft-plugin-ofi)
  weft_add_test(test_netns_auto SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_netns.c LABELS netns TIMEOUT 150
    LIBS weft-test-select-shim ENV WEFT_TEST_TRANSPORT=ofi)
  target_compile_definitions(test_netns_auto PRIVATE weft_connect=wt_select_connect)
  add_dependencies(test_netns_auto weft-plugin-ofi weft-plugin-shm weft-plugin-ucx)
endif()
