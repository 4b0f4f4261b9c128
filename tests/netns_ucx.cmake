# ucx between two network namespaces joined by a veth pair (root only; skips
# otherwise unless WEFT_REQUIRE_NETNS=1): UCX must carry the connection over
# its tcp transport on the veth.
if(TARGET weft-plugin-ucx)
  weft_add_test(test_netns_ucx SOURCES test_netns_ucx.c LABELS netns TIMEOUT 150)
  add_dependencies(test_netns_ucx weft-plugin-ucx)
endif()
