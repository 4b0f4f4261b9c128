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
