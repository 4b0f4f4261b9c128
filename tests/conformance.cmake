# SPDX-License-Identifier: Apache-2.0
# Transport conformance suite (tests/conformance.c): public API only, so the same
# binary checks any transport. In the tree it runs as a Check suite against ofi
# with 2, 3 and 4 ranks; tools/weft-plugin-check.c runs the installed copy
# (weft-conformance), one check per process, against a vendor's plugin file.
if(TARGET weft-plugin-ofi)
  foreach(np 2 3 4)
    weft_add_test(test_conformance_ofi_np${np} SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/conformance.c
      LABELS mp TIMEOUT 110 ENV WEFT_TEST_TRANSPORT=ofi WEFT_TEST_NRANKS=${np})
  endforeach()
  # The vendor's entry point, end to end: the tool finds the binary beside it
  # and runs every check against the plugin file it is given.
  add_test(NAME weft_plugin_check_ofi
    COMMAND $<TARGET_FILE:weft-plugin-check> $<TARGET_FILE:weft-plugin-ofi> --np 2)
  set_tests_properties(weft_plugin_check_ofi PROPERTIES LABELS mp TIMEOUT 150
    DEPENDS test_conformance_ofi_np2
    ENVIRONMENT "WEFT_CONFIG=${CMAKE_CURRENT_BINARY_DIR}/empty.conf;WEFT_PLUGIN_PATH="
    PASS_REGULAR_EXPRESSION "weft-plugin-check: 'ofi' passed"
    FAIL_REGULAR_EXPRESSION "(^|\n)not ok ")
endif()
# A file the core would never load is refused before anything runs.
add_test(NAME weft_plugin_check_bad_name
  COMMAND $<TARGET_FILE:weft-plugin-check> ${CMAKE_CURRENT_SOURCE_DIR}/conformance.c)
set_tests_properties(weft_plugin_check_bad_name PROPERTIES LABELS unit TIMEOUT 30
  PASS_REGULAR_EXPRESSION "is not named libweft-NAME.so")

# The installable binary: same source, run by weft-plugin-check.
add_executable(weft-conformance ${CMAKE_CURRENT_SOURCE_DIR}/conformance.c)
target_link_libraries(weft-conformance PRIVATE weft-testlib ${CMAKE_DL_LIBS})
# Its sigaction and signal must be what plugins' libraries call (conformance.c
# says why), and so must weft-plugin-check's, which loads the file under test.
set_target_properties(weft-conformance weft-plugin-check PROPERTIES ENABLE_EXPORTS ON)
set_target_properties(weft-conformance PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
install(TARGETS weft-conformance RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# tools/weft-plugin-check.c is built and installed with the other tools
# (tools/CMakeLists.txt), beside this binary, where it looks for it.
add_dependencies(weft-plugin-check weft-conformance)
