# SPDX-License-Identifier: Apache-2.0
# Transport conformance suite (tests/conformance.c): public API only, so the same
# binary checks any transport. In the tree it runs against ofi with 2, 3 and 4
# ranks; tools/weft-plugin-check runs the installed copy (weft-conformance)
# against a vendor's plugin.
if(TARGET weft-plugin-ofi)
  foreach(np 2 3 4)
    weft_add_test(test_conformance_ofi_np${np} SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/conformance.c
      LABELS mp TIMEOUT 110 ENV WEFT_TEST_TRANSPORT=ofi WEFT_TEST_NRANKS=${np})
  endforeach()
  # The vendor's entry point, end to end: the script finds the binary beside it
  # and runs the suite against the plugin file it is given.
  add_test(NAME weft_plugin_check_ofi
    COMMAND ${CMAKE_BINARY_DIR}/bin/weft-plugin-check $<TARGET_FILE:weft-plugin-ofi> --np 2)
  set_tests_properties(weft_plugin_check_ofi PROPERTIES LABELS mp TIMEOUT 110
    DEPENDS test_conformance_ofi_np2
    ENVIRONMENT "WEFT_CONFIG=${CMAKE_CURRENT_BINARY_DIR}/empty.conf;WEFT_PLUGIN_PATH=;CK_DEFAULT_TIMEOUT=110"
    PASS_REGULAR_EXPRESSION "weft-plugin-check: 'ofi' passed")
endif()
# A file the core would never load is refused before anything runs.
add_test(NAME weft_plugin_check_bad_name
  COMMAND ${CMAKE_BINARY_DIR}/bin/weft-plugin-check ${CMAKE_CURRENT_SOURCE_DIR}/conformance.c)
set_tests_properties(weft_plugin_check_bad_name PROPERTIES LABELS unit TIMEOUT 30
  PASS_REGULAR_EXPRESSION "is not named libweft-NAME.so")

# The installable binary: same source, run by weft-plugin-check.
add_executable(weft-conformance ${CMAKE_CURRENT_SOURCE_DIR}/conformance.c)
target_link_libraries(weft-conformance PRIVATE weft-testlib)
set_target_properties(weft-conformance PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
install(TARGETS weft-conformance RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(PROGRAMS ${PROJECT_SOURCE_DIR}/tools/weft-plugin-check DESTINATION ${CMAKE_INSTALL_BINDIR})
# Beside the binary in the build tree too, so that build/bin/weft-plugin-check works.
configure_file(${PROJECT_SOURCE_DIR}/tools/weft-plugin-check ${CMAKE_BINARY_DIR}/bin/weft-plugin-check COPYONLY)
