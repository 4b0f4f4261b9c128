# SPDX-License-Identifier: Apache-2.0
# algo-plan's JSON reader and plan loader (plugins/algo-plan/json.c, plan.c),
# compiled in: MSCCL++ 0.9's own plan files, kept unchanged with their MIT
# license in tests/data/mscclpp-0.9-plans/ so a clean clone has them; malformed
# JSON and plans; an allocation failing at every step of a load (WP_ALLOC_HOOK
# counts what the loader holds).
set(_wp_dir ${PROJECT_SOURCE_DIR}/plugins/algo-plan)
weft_add_test(test_plan_parse
  SOURCES test_plan_parse.c ${_wp_dir}/json.c ${_wp_dir}/plan.c ${_wp_dir}/wp_sha256.c
    ${PROJECT_SOURCE_DIR}/core/sha256.c
  LABELS unit TIMEOUT 120)
target_include_directories(test_plan_parse PRIVATE ${_wp_dir})
target_compile_definitions(test_plan_parse PRIVATE WP_ALLOC_HOOK
  PLAN_DATA_DIR="${CMAKE_CURRENT_SOURCE_DIR}/data/mscclpp-0.9-plans")

# plangen_fresh: the plans committed in plugins/algo-plan/plans/ are what
# tools/plangen.py writes now, byte for byte, none missing and none extra, so
# the generator stays their one source. The comparison is a cmake -P script
# written here, since every *.cmake of tests/ is read as a part of this list.
find_program(WEFT_PLANGEN_PYTHON python3)
set(_pg_script ${CMAKE_CURRENT_BINARY_DIR}/plangen_fresh.cmake)
file(WRITE ${_pg_script} [=[
cmake_minimum_required(VERSION 3.25)
set(fix "regenerate with: python3 tools/plangen.py --out plugins/algo-plan/plans")
file(REMOVE_RECURSE "${OUT}")
execute_process(COMMAND "${PY}" "${GEN}" --out "${OUT}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "plangen_fresh: ${GEN} failed (${rc})")
endif()
file(GLOB made RELATIVE "${OUT}" "${OUT}/*.json")
file(GLOB kept RELATIVE "${REF}" "${REF}/*.json")
set(bad 0)
foreach(f IN LISTS made)
  if(NOT f IN_LIST kept)
    message("plangen_fresh: ${f} is generated but missing from ${REF}")
    math(EXPR bad "${bad} + 1")
  else()
    execute_process(COMMAND "${CMAKE_COMMAND}" -E compare_files "${OUT}/${f}" "${REF}/${f}" RESULT_VARIABLE diff)
    if(NOT diff EQUAL 0)
      message("plangen_fresh: ${REF}/${f} differs from what the generator writes now (${OUT}/${f})")
      math(EXPR bad "${bad} + 1")
    endif()
  endif()
endforeach()
foreach(f IN LISTS kept)
  if(NOT f IN_LIST made)
    message("plangen_fresh: ${REF}/${f} is not generated any more")
    math(EXPR bad "${bad} + 1")
  endif()
endforeach()
if(bad)
  message(FATAL_ERROR "plangen_fresh: ${bad} plan file(s) stale; ${fix}")
endif()
list(LENGTH made n)
message("plangen_fresh: ${n} plans, all as committed")
]=])
if(WEFT_PLANGEN_PYTHON)
  add_test(NAME plangen_fresh COMMAND ${CMAKE_COMMAND} -DPY=${WEFT_PLANGEN_PYTHON}
    -DGEN=${PROJECT_SOURCE_DIR}/tools/plangen.py -DREF=${_wp_dir}/plans
    -DOUT=${CMAKE_CURRENT_BINARY_DIR}/plangen_out -P ${_pg_script})
else()
  add_test(NAME plangen_fresh COMMAND sh -c "echo 'plangen_fresh: no python3 here; skipped'; exit 77")
endif()
set_tests_properties(plangen_fresh PROPERTIES LABELS unit TIMEOUT 60 SKIP_RETURN_CODE 77)
