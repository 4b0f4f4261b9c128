# SPDX-License-Identifier: Apache-2.0
# Plugins of an older ABI minor on this core (test_abi): the transport
# skeleton and a small pack, both built against the frozen 0.2 header
# (tests/abi/0.2, put first on their include path so that <weft/plugin.h> is
# the frozen file), in a folder of their own.
if(TARGET weft-plugin-algo-host)
  set(_abi02 ${CMAKE_CURRENT_BINARY_DIR}/plugins-abi02)
  weft_add_plugin(abi02-skeleton SOURCES ${PROJECT_SOURCE_DIR}/examples/plugin-skeleton/skeleton.c NO_INSTALL)
  weft_add_plugin(abi02 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/plugins/pack_0_2.c NO_INSTALL)
  foreach(_p IN ITEMS abi02-skeleton abi02)
    target_include_directories(weft-plugin-${_p} BEFORE PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/abi/0.2)
    set_target_properties(weft-plugin-${_p} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${_abi02})
    # The frozen header predates weft_plugin_init's prototype.
    target_compile_options(weft-plugin-${_p} PRIVATE -Wno-missing-prototypes)
  endforeach()
  set_target_properties(weft-plugin-abi02-skeleton PROPERTIES OUTPUT_NAME weft-skeleton)
  weft_add_test(test_abi SOURCES test_abi.c LABELS unit TIMEOUT 120 ENV WEFT_TEST_ABI02_DIR=${_abi02})
  add_dependencies(test_abi weft-plugin-abi02 weft-plugin-abi02-skeleton weft-plugin-algo-host)
endif()
