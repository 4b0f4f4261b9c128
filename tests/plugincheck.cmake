# SPDX-License-Identifier: Apache-2.0
# tools/weft-plugin-check.c run as a vendor runs it (tests/test_plugincheck.c),
# against plugin files of this build:
#   plugins-lazyflush/libweft-lazyflush.so (tests/plugins/tp_lazyflush.c,
#     descriptor 'lazyflush'): a loopback TCP transport whose flush returns
#     before the target landed anything; WEFT_LAZYFLUSH_CORRECT=1 makes it
#     wait, WEFT_LAZYFLUSH_CRASH=connect|put makes it die there;
#   plugins-lazyflush/libweft-tp-crashinit.so, its sibling, which dies in
#     weft_plugin_init: checking the other file must never load it;
#   shm, a registry test file built for another ABI major (rt-abi1), and the
#     examples/plugin-skeleton build (same-process only: nothing can run);
#   ofi, ucx, shm and algo-host on two hosts (--hosts 2): by the test host
#     identity (case hosts), and in network namespaces (case netns, label
#     netns: root and ip netns).
# Each case is its own ctest entry (CK_RUN_CASE).
weft_add_plugin(lazyflush SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/plugins/tp_lazyflush.c LIBS Threads::Threads
  NO_INSTALL)
weft_add_plugin(tp-crashinit SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/plugins/tp_lazyflush.c LIBS Threads::Threads
  NO_INSTALL)
target_compile_definitions(weft-plugin-tp-crashinit PRIVATE LF_CRASH_AT_INIT=1)
set_target_properties(weft-plugin-lazyflush weft-plugin-tp-crashinit PROPERTIES
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/plugins-lazyflush)

if(TARGET weft-plugin-shm)
  add_executable(test_plugincheck ${CMAKE_CURRENT_SOURCE_DIR}/test_plugincheck.c)
  target_link_libraries(test_plugincheck PRIVATE weft-testlib)
  target_compile_definitions(test_plugincheck PRIVATE
    PC_TOOL="$<TARGET_FILE:weft-plugin-check>"
    PC_LAZY="$<TARGET_FILE:weft-plugin-lazyflush>"
    PC_CRASHINIT="$<TARGET_FILE:weft-plugin-tp-crashinit>"
    PC_SHM="$<TARGET_FILE:weft-plugin-shm>"
    PC_ABI1="$<TARGET_FILE:weft-plugin-rt-abi1>"
    PC_SKELETON="${CMAKE_CURRENT_BINARY_DIR}/example-plugin-skeleton/libweft-skeleton.so")
  add_dependencies(test_plugincheck weft-plugin-check weft-conformance weft-plugin-lazyflush
    weft-plugin-tp-crashinit weft-plugin-shm weft-plugin-rt-abi1)
  # The two-host cases' plugins, "" where this build has none (the case says so).
  foreach(p ofi ucx algo-host)
    string(TOUPPER ${p} _pc_var)
    string(REPLACE "-" "_" _pc_var ${_pc_var})
    if(TARGET weft-plugin-${p})
      target_compile_definitions(test_plugincheck PRIVATE PC_${_pc_var}="$<TARGET_FILE:weft-plugin-${p}>")
      add_dependencies(test_plugincheck weft-plugin-${p})
    else()
      target_compile_definitions(test_plugincheck PRIVATE PC_${_pc_var}="")
    endif()
  endforeach()
  foreach(case usage lazyflush shm hosts netns)
    add_test(NAME test_plugincheck_${case} COMMAND test_plugincheck)
    set_tests_properties(test_plugincheck_${case} PROPERTIES LABELS mp TIMEOUT 400 SKIP_RETURN_CODE 77
      ENVIRONMENT "WEFT_CONFIG=${CMAKE_CURRENT_BINARY_DIR}/empty.conf;WEFT_PLUGIN_PATH=;CK_DEFAULT_TIMEOUT=400;CK_RUN_CASE=${case}")
  endforeach()
  set_tests_properties(test_plugincheck_shm PROPERTIES FIXTURES_REQUIRED skeleton_built)
  # Root and ip netns (skips otherwise, fails under WEFT_REQUIRE_NETNS=1).
  set_tests_properties(test_plugincheck_netns PROPERTIES LABELS netns)
endif()
