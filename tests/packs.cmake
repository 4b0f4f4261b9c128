# SPDX-License-Identifier: Apache-2.0
# test_packs: what the core gives ABI 0.3 packs (tests/plugins/pack_failsetup.c,
# in a folder of its own): a setup that fails on one rank while the others
# connect to it falls back on every rank together; comm_setup's state reaches
# setup and comm_teardown runs once; the topology packs see.
if(TARGET weft-plugin-algo-host AND TARGET weft-plugin-shm)
  set(_fs_dir ${CMAKE_CURRENT_BINARY_DIR}/plugins-failsetup)
  weft_add_plugin(failsetup SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/plugins/pack_failsetup.c NO_INSTALL)
  set_target_properties(weft-plugin-failsetup PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${_fs_dir})
  weft_add_test(test_packs SOURCES test_packs.c LABELS mp TIMEOUT 180 ENV WEFT_TEST_FAILSETUP_PLUGIN_DIR=${_fs_dir})
  add_dependencies(test_packs weft-plugin-failsetup weft-plugin-algo-host weft-plugin-shm)

  # test_stall: a rank alive but stuck (asleep or spinning in its own code,
  # or asleep inside a call: the test pack's execute) is named by the
  # waiting rank's stall warning, the call fails with -ETIMEDOUT after
  # core.stall_timeout on every rank, and no rank is declared dead.
  weft_add_test(test_stall SOURCES test_stall.c LABELS mp TIMEOUT 120 ENV WEFT_TEST_FAILSETUP_PLUGIN_DIR=${_fs_dir})
  target_compile_definitions(test_stall PRIVATE RT_WEFT_INFO="$<TARGET_FILE:weft-info>")
  add_dependencies(test_stall weft-plugin-failsetup weft-plugin-algo-host weft-plugin-shm weft-info)
endif()
