# SPDX-License-Identifier: Apache-2.0
# algo-gpu's cross-host executor on host memory (the hxtest pack, in a folder
# of its own): forked ranks on 2 and 3 test hosts, shm inside a host and ofi
# or ucx (tcp on 127.0.0.1) between, every collective, and a rank killed;
# and weft-plugin-check's mismatch check on it (one host, shm).
if(TARGET weft-plugin-algo-host AND TARGET weft-plugin-shm AND WEFT_TEST_HOOKS)
  set(_hx_dir ${CMAKE_CURRENT_BINARY_DIR}/plugins-hxtest)
  set(_ag ${PROJECT_SOURCE_DIR}/plugins/algo-gpu)
  weft_add_plugin(hxtest SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/plugins/pack_hxtest.c ${_ag}/hx.c ${_ag}/hier.c
    ${_ag}/schedule.c INCLUDES ${_ag} NO_INSTALL)
  set_target_properties(weft-plugin-hxtest PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${_hx_dir})
  # weft-plugin-check's mismatch check on the executor (the one gpu-check
  # runs on algo-gpu): a call the last rank makes with another datatype of
  # the same size fails with -WEFT_ERR_MISMATCH on every rank.
  add_test(NAME pack_conformance_hxtest_mismatch
    COMMAND weft-plugin-check --np 2,3 --check "*mismatch" $<TARGET_FILE:weft-plugin-hxtest>)
  set_tests_properties(pack_conformance_hxtest_mismatch PROPERTIES LABELS mp TIMEOUT 120
    ENVIRONMENT
    "WEFT_CONFIG=${CMAKE_CURRENT_BINARY_DIR}/empty.conf;WEFT_PLUGIN_PATH=;WEFT_CORE_PLUGINS=shm,hxtest;WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1"
    FAIL_REGULAR_EXPRESSION "(^|\n)not ok ")
  foreach(t ofi ucx)
    if(TARGET weft-plugin-${t})
      weft_add_test(test_hier_exec_${t} SOURCES test_hier_exec.c LABELS mp TIMEOUT 240 LIBS m
        ENV WEFT_TEST_HXTEST_PLUGIN_DIR=${_hx_dir} WEFT_TEST_TRANSPORT=${t})
      add_dependencies(test_hier_exec_${t} weft-plugin-hxtest weft-plugin-shm weft-plugin-${t})
      # The same across two network namespaces joined by a veth pair (root).
      weft_add_test(test_hier_exec_netns_${t} SOURCES test_hier_exec.c LABELS netns TIMEOUT 240 LIBS m
        ENV WEFT_TEST_HXTEST_PLUGIN_DIR=${_hx_dir} WEFT_TEST_TRANSPORT=${t}
        WEFT_TEST_NETNS=1)
      add_dependencies(test_hier_exec_netns_${t} weft-plugin-hxtest weft-plugin-shm weft-plugin-${t})
      # The same with the ops queued until sync, as a GPU stream runs them:
      # a step that reads before syncing what writes it fails here.
      if(t STREQUAL "ofi")
        add_test(NAME test_hier_exec_async_${t} COMMAND test_hier_exec_${t})
        set_tests_properties(test_hier_exec_async_${t} PROPERTIES LABELS mp TIMEOUT 240 SKIP_RETURN_CODE 77
          ENVIRONMENT "WEFT_TEST_HXTEST_PLUGIN_DIR=${_hx_dir};WEFT_TEST_TRANSPORT=${t};WEFT_HXTEST_ASYNC=1")
      endif()
    endif()
  endforeach()
endif()
