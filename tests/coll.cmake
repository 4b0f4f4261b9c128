# SPDX-License-Identifier: Apache-2.0
# Collective layer (core/coll.c) and the algo-host pack.
# test_algo_select: no processes: names, parsers and algorithm selection
# through weft__coll_print_choices, with the pack loaded from the build tree
# (its reductions are the kit's: tests/kit.cmake).
if(TARGET weft-plugin-algo-host)
  weft_add_test(test_algo_select
    SOURCES test_algo_select.c
    LABELS unit TIMEOUT 120 LIBS m)
  add_dependencies(test_algo_select weft-plugin-algo-host)
endif()

# test_coll: forked ranks (2, 3, 4) run every collective over ofi and check
# them against references computed from each rank's seeded data; windows
# (weft_window_register): refusals, collectives in them, offsets that differ.
if(TARGET weft-plugin-algo-host AND TARGET weft-plugin-ofi)
  weft_add_test(test_coll SOURCES test_coll.c LABELS mp TIMEOUT 420 LIBS m)
  add_dependencies(test_coll weft-plugin-algo-host weft-plugin-ofi)
endif()

# test_coll_complete: a host collective has delivered its data when it returns
# (a broadcast root that then blocks in another communicator).
if(TARGET weft-plugin-algo-host AND TARGET weft-plugin-ofi)
  weft_add_test(test_coll_complete SOURCES test_coll_complete.c LABELS mp TIMEOUT 120)
  add_dependencies(test_coll_complete weft-plugin-algo-host weft-plugin-ofi)
endif()

# test_premul: pre-multiplied sums on host buffers through algo-host, forked
# ranks, bit for bit against a reference that rounds as NCCL does.
if(TARGET weft-plugin-algo-host)
  weft_add_test(test_premul SOURCES test_premul.c LABELS mp TIMEOUT 300 LIBS m)
  add_dependencies(test_premul weft-plugin-algo-host)
endif()

# test_agree: two forked ranks whose calls disagree (count, type, operation,
# root, collective, send/recv size, a skipped call) fail with
# WEFT_ERR_MISMATCH within 2 s; a destroy during a peer's call fails it.
if(TARGET weft-plugin-algo-host AND TARGET weft-plugin-shm)
  weft_add_test(test_agree SOURCES test_agree.c LABELS mp TIMEOUT 240)
  add_dependencies(test_agree weft-plugin-algo-host weft-plugin-shm)
endif()
