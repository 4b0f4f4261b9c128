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
