# SPDX-License-Identifier: Apache-2.0
# Config module tests. weft__* symbols are hidden in libweft.so, so the test
# builds the module's own sources in (its copies are the ones it calls).
weft_add_test(test_config
  SOURCES test_config.c
    ${PROJECT_SOURCE_DIR}/core/config.c
    ${PROJECT_SOURCE_DIR}/core/cfgtext.c
    ${PROJECT_SOURCE_DIR}/core/core_params.c
    ${PROJECT_SOURCE_DIR}/core/cfgrules.c
    ${PROJECT_SOURCE_DIR}/core/rules.c
    ${PROJECT_SOURCE_DIR}/core/log.c
  LABELS unit
  TIMEOUT 120)
