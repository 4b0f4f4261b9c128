# SPDX-License-Identifier: Apache-2.0
# weft-perf --op put|pingpong --mem cuda where no GPU can be used (label unit,
# every host): one clear message and exit 1, never a crash, whether
# libweft-perf-gpu.so is built (CUDA hidden with CUDA_VISIBLE_DEVICES=) or
# missing. The GPU figures themselves come from tools/gpu-check.sh bench.
if(TARGET weft-perf)
  set(_pg_env "WEFT_TEST_PERF=$<TARGET_FILE:weft-perf>" "WEFT_TEST_LIBWEFT=$<TARGET_FILE:weft>"
    WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1)
  if(TARGET weft-perf-gpu)
    list(APPEND _pg_env "WEFT_TEST_PERF_GPU_LIB=$<TARGET_FILE:weft-perf-gpu>")
  endif()
  weft_add_test(test_perfgpu SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_perfgpu.c LABELS unit TIMEOUT 120
    ENV ${_pg_env})
  add_dependencies(test_perfgpu weft-perf)
endif()
# The same binary on GPUs (label gpu, tools/gpu-check.sh's test stage): small
# put and pingpong sweeps through nvlink, every table's data check passing.
if(TARGET weft-perf AND TARGET weft-perf-gpu AND TARGET weft-plugin-nvlink)
  weft_add_test(test_perfgpu_gpu SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_perfgpu.c LABELS gpu TIMEOUT 600
    ENV "WEFT_TEST_PERF=$<TARGET_FILE:weft-perf>" WEFT_TEST_PERFGPU_GPU=1 WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1
    NCCL_NVLS_ENABLE=0)
  add_dependencies(test_perfgpu_gpu weft-perf weft-perf-gpu weft-plugin-nvlink)
endif()
