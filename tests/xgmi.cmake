# SPDX-License-Identifier: Apache-2.0
# The xgmi plugin loads and explains itself without an AMD GPU, and the HIP
# test kernel (device.h under HIP) was built for its architecture (runs in CI;
# no AMD GPU exists in this workplace, so nothing here runs HIP device code).
if(TARGET weft-plugin-xgmi)
  get_property(_xgmi_kobj GLOBAL PROPERTY WEFT_HIP_KERNEL_OBJ)
  # roc-obj-ls (ROCm's bundle lister) when present; the test reads the bundle
  # itself either way.
  find_program(WEFT_ROC_OBJ_LS roc-obj-ls PATHS /opt/rocm/bin)
  set(_xgmi_lister "${WEFT_ROC_OBJ_LS}")
  if(NOT _xgmi_lister)
    set(_xgmi_lister "")
  endif()
  list(GET WEFT_HIP_ARCH 0 _xgmi_arch)
  weft_add_test(test_xgmi_nodev SOURCES test_xgmi_nodev.c LABELS unit TIMEOUT 60)
  target_compile_definitions(test_xgmi_nodev PRIVATE WEFT_INFO_PATH="$<TARGET_FILE:weft-info>"
    WEFT_XGMI_PLUGIN_DIR="$<TARGET_FILE_DIR:weft-plugin-xgmi>" WEFT_HIP_KERNEL_OBJ="${_xgmi_kobj}"
    WEFT_HIP_ARCH="${_xgmi_arch}" WEFT_ROC_OBJ_LS="${_xgmi_lister}")
  add_dependencies(test_xgmi_nodev weft-plugin-xgmi weft-info weft-hip-kernel)

  # The same plugin built to look for a HIP runtime library that no host has:
  # what a host without ROCm installed sees. Its own folder, so no plugin scan
  # of the build tree finds two "xgmi" descriptors.
  add_library(weft-test-xgmi-norocm MODULE ${PROJECT_SOURCE_DIR}/plugins/xgmi/xgmi.c
    ${PROJECT_SOURCE_DIR}/plugins/gpurt/gpurt.c ${PROJECT_SOURCE_DIR}/plugins/gpurt/gpurt_hip.c)
  target_include_directories(weft-test-xgmi-norocm PRIVATE ${PROJECT_SOURCE_DIR}/include ${WEFT_HIP_INCLUDE_DIR})
  target_compile_definitions(weft-test-xgmi-norocm PRIVATE __HIP_PLATFORM_AMD__
    GRT_HIP_LIB="libamdhip64-weft-test-absent.so")
  target_link_libraries(weft-test-xgmi-norocm PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
  set_target_properties(weft-test-xgmi-norocm PROPERTIES OUTPUT_NAME weft-xgmi PREFIX lib
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/xgmi-norocm C_VISIBILITY_PRESET hidden)
  target_compile_definitions(test_xgmi_nodev PRIVATE
    WEFT_XGMI_NOROCM_DIR="${CMAKE_CURRENT_BINARY_DIR}/xgmi-norocm")
  add_dependencies(test_xgmi_nodev weft-test-xgmi-norocm)
endif()
