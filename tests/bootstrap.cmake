# SPDX-License-Identifier: Apache-2.0
# Bootstrap tests. weft__* symbols are hidden in libweft.so, so the tests build
# the bootstrap and the modules it calls from source (their copies are the ones
# called). One source, two executables: the unit suite and the forked ranks.
set(_bs_sources
  ${CMAKE_CURRENT_LIST_DIR}/test_bootstrap.c
  ${PROJECT_SOURCE_DIR}/core/bootstrap/params.c
  ${PROJECT_SOURCE_DIR}/core/bootstrap/net.c
  ${PROJECT_SOURCE_DIR}/core/bootstrap/link.c
  ${PROJECT_SOURCE_DIR}/core/bootstrap/auth.c
  ${PROJECT_SOURCE_DIR}/core/bootstrap/root.c
  ${PROJECT_SOURCE_DIR}/core/bootstrap/service.c
  ${PROJECT_SOURCE_DIR}/core/bootstrap/callcheck.c
  ${PROJECT_SOURCE_DIR}/core/bootstrap/launcher.c
  ${PROJECT_SOURCE_DIR}/core/bootstrap/bootstrap.c
  ${PROJECT_SOURCE_DIR}/core/sha256.c
  ${PROJECT_SOURCE_DIR}/core/hostid.c
  ${PROJECT_SOURCE_DIR}/core/config.c
  ${PROJECT_SOURCE_DIR}/core/cfgtext.c
  ${PROJECT_SOURCE_DIR}/core/core_params.c
  ${PROJECT_SOURCE_DIR}/core/cfgrules.c
  ${PROJECT_SOURCE_DIR}/core/rules.c
  ${PROJECT_SOURCE_DIR}/core/log.c
  ${PROJECT_SOURCE_DIR}/core/error.c)
weft_add_test(test_bootstrap_unit SOURCES ${_bs_sources} LABELS unit TIMEOUT 120)
target_compile_definitions(test_bootstrap_unit PRIVATE BS_SUITE="unit")
weft_add_test(test_bootstrap SOURCES ${_bs_sources} LABELS mp TIMEOUT 300)
target_compile_definitions(test_bootstrap PRIVATE BS_SUITE="mp")
