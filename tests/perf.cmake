# SPDX-License-Identifier: Apache-2.0
# weft-perf, run as a user runs it (tests/test_perf.c): flags and their errors,
# the put/pingpong tables over ofi, and, when the host algorithm pack is built,
# the collective tables with #wrong == 0. Ranks meet on 127.0.0.1.
if(TARGET weft-plugin-ofi AND TARGET weft-perf)
  set(_perf_env "WEFT_TEST_PERF=$<TARGET_FILE:weft-perf>" WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1)
  set(_perf_deps weft-perf weft-plugin-ofi)
  if(TARGET weft-plugin-algo-host)
    list(APPEND _perf_env WEFT_TEST_PERF_COLL=1)
    list(APPEND _perf_deps weft-plugin-algo-host)
  endif()
  weft_add_test(test_perf SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_perf.c LABELS mp TIMEOUT 300
    ENV ${_perf_env} LIBS m)
  add_dependencies(test_perf ${_perf_deps})
endif()
