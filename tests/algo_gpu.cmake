# algo-gpu: the chunk schedules are plain C and tested on every machine
# (label unit); the GPU tests and benchmark need the plugin built (CUDA
# compiler present) and run only where a GPU is (label gpu, skip 77 otherwise).
weft_add_test(test_algo_gpu_sched
  SOURCES test_algo_gpu_sched.c ${PROJECT_SOURCE_DIR}/plugins/algo-gpu/schedule.c
  LABELS unit TIMEOUT 120)
