# SPDX-License-Identifier: Apache-2.0
# The ucx transport's device memory: the plugin's sources (weft-ucx-testable)
# driven through a UCX double whose context reaches CUDA memory.
if(TARGET weft-ucx-testable)
  weft_add_test(test_ucx_mem SOURCES test_ucx_mem.c tp_harness.c LABELS unit TIMEOUT 120 LIBS weft-ucx-testable)
endif()
