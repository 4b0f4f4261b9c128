# Transport conformance suite (tests/conformance.c): public API only, so the same
# binary checks any transport. In the tree it runs against ofi with 2, 3 and 4
# ranks; tools/weft-plugin-check runs the installed copy (weft-conformance)
# against a vendor's plugin.
if(TARGET weft-plugin-ofi)
  foreach(np 2 3 4)
    weft_add_test(test_conformance_ofi_np${np} SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/conformance.c
      LABELS mp TIMEOUT 110 ENV WEFT_TEST_TRANSPORT=ofi WEFT_TEST_NRANKS=${np})
  endforeach()
endif()

# The installable binary: same source, run by weft-plugin-check.
add_executable(weft-conformance ${CMAKE_CURRENT_SOURCE_DIR}/conformance.c)
target_link_libraries(weft-conformance PRIVATE weft-testlib)
set_target_properties(weft-conformance PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
install(TARGETS weft-conformance RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(PROGRAMS ${PROJECT_SOURCE_DIR}/tools/weft-plugin-check DESTINATION ${CMAKE_INSTALL_BINDIR})
# Beside the binary in the build tree too, so that build/bin/weft-plugin-check works.
configure_file(${PROJECT_SOURCE_DIR}/tools/weft-plugin-check ${CMAKE_BINARY_DIR}/bin/weft-plugin-check COPYONLY)
