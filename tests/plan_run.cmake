# SPDX-License-Identifier: Apache-2.0
# algo-plan as a pack (tests/test_plan_run.c): MSCCL++ 0.9's own plans run by
# the CPU interpreter on host buffers with forked ranks over shm, chosen by
# `require` rules, and weft-plan-check on the same files.
if(TARGET weft-plugin-algo-plan AND TARGET weft-plugin-shm AND TARGET weft-plan-check)
  weft_add_test(test_plan_run SOURCES test_plan_run.c LABELS mp TIMEOUT 600)
  target_compile_definitions(test_plan_run PRIVATE
    PLAN_DATA_DIR="${CMAKE_CURRENT_SOURCE_DIR}/data/mscclpp-0.9-plans"
    PLAN_OWN_DIR="${PROJECT_SOURCE_DIR}/plugins/algo-plan/plans"
    PLAN_CHECK_BIN="$<TARGET_FILE:weft-plan-check>"
    WEFT_INFO_BIN="$<TARGET_FILE:weft-info>")
  add_dependencies(test_plan_run weft-plugin-algo-plan weft-plugin-shm weft-plan-check weft-info)
endif()
