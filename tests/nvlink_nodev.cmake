# SPDX-License-Identifier: Apache-2.0
# The nvlink plugin loads and explains itself without a GPU (runs in CI).
if(TARGET weft-plugin-nvlink)
  weft_add_test(test_nvlink_nodev SOURCES test_nvlink_nodev.c LABELS unit TIMEOUT 60)
  target_compile_definitions(test_nvlink_nodev PRIVATE WEFT_INFO_PATH="$<TARGET_FILE:weft-info>"
    WEFT_NVLINK_PLUGIN_DIR="$<TARGET_FILE_DIR:weft-plugin-nvlink>")
  add_dependencies(test_nvlink_nodev weft-plugin-nvlink weft-info)
endif()
