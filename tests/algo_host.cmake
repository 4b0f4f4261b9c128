# SPDX-License-Identifier: Apache-2.0
# test_algo_host: algo-host over shm, where every pair maps each other: the
# cached direct gather and publish-and-pull, 2 and 3 forked ranks, checked
# against references computed in the test.
if(TARGET weft-plugin-algo-host AND TARGET weft-plugin-shm)
  weft_add_test(test_algo_host SOURCES test_algo_host.c LABELS mp TIMEOUT 180)
  add_dependencies(test_algo_host weft-plugin-algo-host weft-plugin-shm)
endif()
