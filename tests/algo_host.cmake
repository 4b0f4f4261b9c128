# SPDX-License-Identifier: Apache-2.0
# test_algo_host: algo-host over shm, where every pair maps each other: the
# cached direct gather and publish-and-pull, 2 and 3 forked ranks, checked
# against references computed in the test.
# test_algo_host_many: the log-step algorithms, each forced by a rule, at 3
# to 16 forked ranks, every type and reduction (6 and 12 ranks bound to two
# NUMA nodes of tests/topo_two_numa.xml).
# test_algo_host_place: the NUMA placement (place.c alone) on that topology.
if(TARGET weft-plugin-algo-host AND TARGET weft-plugin-shm)
  weft_add_test(test_algo_host SOURCES test_algo_host.c LABELS mp TIMEOUT 180)
  add_dependencies(test_algo_host weft-plugin-algo-host weft-plugin-shm)
  weft_add_test(test_algo_host_many SOURCES test_algo_host_many.c LABELS mp TIMEOUT 300)
  target_compile_definitions(test_algo_host_many PRIVATE TT_TWO_NUMA="${CMAKE_CURRENT_SOURCE_DIR}/topo_two_numa.xml")
  add_dependencies(test_algo_host_many weft-plugin-algo-host weft-plugin-shm)
endif()
if(TARGET weft-plugin-algo-host)
  weft_add_test(test_algo_host_place SOURCES test_algo_host_place.c
    ${PROJECT_SOURCE_DIR}/plugins/algo-host/place.c LABELS unit TIMEOUT 60)
  target_compile_definitions(test_algo_host_place PRIVATE TT_TWO_NUMA="${CMAKE_CURRENT_SOURCE_DIR}/topo_two_numa.xml")
  if(WEFT_HAVE_HWLOC)
    target_include_directories(test_algo_host_place PRIVATE ${HWLOC_INCLUDE_DIRS})
    target_link_libraries(test_algo_host_place PRIVATE ${HWLOC_LINK_LIBRARIES})
    target_compile_definitions(test_algo_host_place PRIVATE TT_HWLOC=1 AH_HAVE_HWLOC=1)
  endif()
endif()
