# SPDX-License-Identifier: Apache-2.0
# libweft_nccl (nccl/): the NCCL 2.28 API on weft. One source, two runs:
# test_nccl_unit (one process: exported symbols against nccl/symbols.txt,
# ncclConfig_t layout, versions, errors, refusals, the fallback's NVLS guard)
# and test_nccl (forked 2- and 3-rank jobs over ofi on loopback, ncclCommInitAll
# with two ranks in one process, a killed peer). No GPU: host buffers.
# Data goes over ofi (tcp on loopback), not the same-host shm transport: the
# algo-host pack's transport parameter pins it.
if(TARGET weft_nccl AND TARGET weft-plugin-algo-host AND TARGET weft-plugin-ofi)
  foreach(_t IN ITEMS test_nccl_unit test_nccl)
    if(_t STREQUAL "test_nccl_unit")
      set(_case unit)
      set(_label unit)
    else()
      set(_case mp)
      set(_label mp)
    endif()
    weft_add_test(${_t} SOURCES test_nccl.c nccl_refusals.c LABELS ${_label} TIMEOUT 400 LIBS weft_nccl
      ENV CK_RUN_CASE=${_case} WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1
      WEFT_ALGO_HOST_TRANSPORT=ofi)
    target_compile_definitions(${_t} PRIVATE
      WEFT_NCCL_LIB="$<TARGET_FILE:weft_nccl>"
      WEFT_NCCL_SYMBOLS="${PROJECT_SOURCE_DIR}/nccl/symbols.txt"
      WEFT_NCCL_FAKE="$<TARGET_FILE:weft-test-fakenccl>")
    add_dependencies(${_t} weft-plugin-algo-host weft-plugin-ofi weft-test-fakenccl)
  endforeach()
  # Non-blocking communicators (test_nccl_async), ncclCommShrink after a rank
  # died and ncclCommGrow (test_nccl_reshape): forked ranks as test_nccl's.
  foreach(_t IN ITEMS test_nccl_async test_nccl_reshape)
    weft_add_test(${_t} SOURCES ${_t}.c LABELS mp TIMEOUT 120 LIBS weft_nccl Threads::Threads
      ENV WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1 WEFT_ALGO_HOST_TRANSPORT=ofi)
    add_dependencies(${_t} weft-plugin-algo-host weft-plugin-ofi)
  endforeach()
endif()

# weft-nccl-driver end to end: every collective it knows, checked values
# (#wrong must be 0, else it exits non-zero), forked ranks and two ranks in
# one process driven through groups.
if(TARGET weft-nccl-driver AND TARGET weft-plugin-algo-host AND TARGET weft-plugin-ofi)
  foreach(_mode np3 initall2)
    if(_mode STREQUAL "np3")
      set(_args --np 3)
    else()
      set(_args --init-all 2)
    endif()
    add_test(NAME nccl_driver_${_mode}
      COMMAND weft-nccl-driver -o all -b 4 -e 256K -f 8 -n 3 -w 1 ${_args})
    set_tests_properties(nccl_driver_${_mode} PROPERTIES LABELS mp TIMEOUT 120 SKIP_RETURN_CODE 77
      ENVIRONMENT "WEFT_CONFIG=${CMAKE_CURRENT_BINARY_DIR}/empty.conf;WEFT_ALGO_HOST_TRANSPORT=ofi;WEFT_PLUGIN_PATH=;WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1;WEFT_CORE_PEER_TIMEOUT=5")
  endforeach()
endif()

# Switching over without rebuilding: a program that needs libnccl.so.2 (here
# linked against a stand-in) answers with weft's version through the drop-in
# folder or LD_PRELOAD, and with the stand-in's without them.
if(TARGET weft-test-nccl-dropin AND TARGET weft_nccl)
  set(_fake ${CMAKE_BINARY_DIR}/tests/fake-nccl)
  add_test(NAME nccl_dropin_none COMMAND weft-test-nccl-dropin)
  set_tests_properties(nccl_dropin_none PROPERTIES ENVIRONMENT "LD_LIBRARY_PATH=${_fake}"
    PASS_REGULAR_EXPRESSION "ncclGetVersion: 22899")
  add_test(NAME nccl_dropin_libpath COMMAND weft-test-nccl-dropin)
  set_tests_properties(nccl_dropin_libpath PROPERTIES
    ENVIRONMENT "LD_LIBRARY_PATH=${CMAKE_LIBRARY_OUTPUT_DIRECTORY}/nccl;WEFT_CONFIG=${CMAKE_CURRENT_BINARY_DIR}/empty.conf"
    PASS_REGULAR_EXPRESSION "ncclGetVersion: 22809")
  set_tests_properties(nccl_dropin_none nccl_dropin_libpath PROPERTIES LABELS unit TIMEOUT 30)
  # A sanitized library cannot be preloaded ahead of the sanitizer runtime.
  if(NOT WEFT_SANITIZE)
    # Every refuse-then-use case in a program built against the stand-in, with
    # libweft_nccl preloaded: the stand-in never sees a weft communicator.
    add_executable(weft-test-nccl-refusals nccl_refusals_main.c nccl_refusals.c)
    target_include_directories(weft-test-nccl-refusals PRIVATE ${PROJECT_SOURCE_DIR}/nccl/include)
    add_dependencies(weft-test-nccl-refusals weft-test-fakenccl)
    target_link_options(weft-test-nccl-refusals PRIVATE "LINKER:--no-as-needed" ${_fake}/libnccl.so.2)
    set_target_properties(weft-test-nccl-refusals PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${_fake} SKIP_BUILD_RPATH ON)
    add_test(NAME nccl_refusals_preload
      COMMAND weft-test-nccl-refusals ${PROJECT_SOURCE_DIR}/nccl/symbols.txt ${_fake}/libnccl.so.2)
    set_tests_properties(nccl_refusals_preload PROPERTIES LABELS unit TIMEOUT 60
      ENVIRONMENT "LD_LIBRARY_PATH=${_fake};LD_PRELOAD=$<TARGET_FILE:weft_nccl>;WEFT_CONFIG=${CMAKE_CURRENT_BINARY_DIR}/empty.conf;WEFT_PLUGIN_PATH=;WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1"
      PASS_REGULAR_EXPRESSION "every case passed; the stand-in libnccl got [1-9][0-9]* call\\(s\\), 0 with a communicator it did not make")
    add_test(NAME nccl_dropin_preload COMMAND weft-test-nccl-dropin)
    set_tests_properties(nccl_dropin_preload PROPERTIES LABELS unit TIMEOUT 30
      ENVIRONMENT "LD_LIBRARY_PATH=${_fake};LD_PRELOAD=$<TARGET_FILE:weft_nccl>;WEFT_CONFIG=${CMAKE_CURRENT_BINARY_DIR}/empty.conf"
      PASS_REGULAR_EXPRESSION "ncclGetVersion: 22809")
  endif()
endif()
