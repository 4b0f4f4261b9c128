# SPDX-License-Identifier: Apache-2.0
# Algorithm-pack conformance checks (tests/pack_conformance.c), built and
# installed as weft-pack-conformance beside weft-conformance, where
# tools/weft-plugin-check.c looks for the pack suite. In the tree:
#   pack_conformance_algo_host  weft-plugin-check on algo-host: every check at
#                               2, 3, 4 and 8 ranks, two at a time;
#   pack_conformance_wrong      a pack whose float16 allreduce leaves one rank
#                               out (tests/plugins/pack_wrong.c, in a folder
#                               of its own) fails its dtypes-ops check.
add_executable(weft-pack-conformance ${CMAKE_CURRENT_SOURCE_DIR}/pack_conformance.c
  ${PROJECT_SOURCE_DIR}/tools/cudart_dl.c)
target_include_directories(weft-pack-conformance PRIVATE ${PROJECT_SOURCE_DIR}/tools)
target_link_libraries(weft-pack-conformance PRIVATE weft Threads::Threads m ${CMAKE_DL_LIBS})
# Its sigaction and signal must be what plugins' libraries call (pack_conformance.c).
set_target_properties(weft-pack-conformance PROPERTIES ENABLE_EXPORTS ON
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
install(TARGETS weft-pack-conformance RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
add_dependencies(weft-plugin-check weft-pack-conformance)

set(_pc_sh ${CMAKE_CURRENT_SOURCE_DIR}/pack_conformance.sh)
set(_pc_env "WEFT_CONFIG=${CMAKE_CURRENT_BINARY_DIR}/empty.conf;WEFT_PLUGIN_PATH=")
if(TARGET weft-plugin-algo-host AND TARGET weft-plugin-shm)
  add_test(NAME pack_conformance_algo_host
    COMMAND weft-plugin-check --jobs 2 --np 2,3,4,8 $<TARGET_FILE:weft-plugin-algo-host>)
  # Only what a host pack on one host uses is loaded ([core] plugins): the
  # core picks shm for host memory there anyway, and opening every transport
  # in every rank of every check was most of the run's time.
  set_tests_properties(pack_conformance_algo_host PROPERTIES LABELS mp TIMEOUT 600
    ENVIRONMENT "${_pc_env};WEFT_CORE_PLUGINS=shm,algo-host" FAIL_REGULAR_EXPRESSION "(^|\n)not ok ")
  add_dependencies(weft-pack-conformance weft-plugin-algo-host weft-plugin-shm)

  set(_pw_dir ${CMAKE_CURRENT_BINARY_DIR}/plugins-packwrong)
  weft_add_plugin(pack-wrong SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/plugins/pack_wrong.c NO_INSTALL)
  set_target_properties(weft-plugin-pack-wrong PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${_pw_dir})
  add_dependencies(weft-pack-conformance weft-plugin-pack-wrong)
  add_test(NAME pack_conformance_wrong
    COMMAND bash ${_pc_sh} expect-fail $<TARGET_FILE:weft-pack-conformance> pack-wrong
      allreduce-offbyone/dtypes-ops 2 "float16 sum (in|out of) place.*output elements wrong")
  set_tests_properties(pack_conformance_wrong PROPERTIES LABELS mp TIMEOUT 120
    ENVIRONMENT "WEFT_CONFIG=${CMAKE_CURRENT_BINARY_DIR}/empty.conf;WEFT_PLUGIN_PATH=${_pw_dir}")
endif()
