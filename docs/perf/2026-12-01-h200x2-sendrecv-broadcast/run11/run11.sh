export LD_LIBRARY_PATH=/usr/local/cuda/lib64 NCCL_NVLS_ENABLE=0 WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1
nvidia-smi -L > $OUT/env.log; date -u >> $OUT/env.log
WEFT_GPU_CTEST_ARGS='-R test_algo_gpu' WAG_TEST_TIMEOUT=200 timeout 420 bash tools/gpu-check.sh test > $OUT/test.out 2>&1
grep -E "Passed|Failed|tests passed|FAIL|\*\*\*|wrong|error" $OUT/test.out | tail -24
