# SPDX-License-Identifier: Apache-2.0
# Two "hosts" in network namespaces joined by a veth pair (root only; skips
# otherwise unless WEFT_REQUIRE_NETNS=1): each network transport must carry the
# connection over tcp on the veth.
foreach(t ofi ucx)
  if(TARGET weft-plugin-${t})
    weft_add_test(test_netns_${t} SOURCES test_netns.c LABELS netns TIMEOUT 150 ENV WEFT_TEST_TRANSPORT=${t})
    add_dependencies(test_netns_${t} weft-plugin-${t})
  endif()
endforeach()
