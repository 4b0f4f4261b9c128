export LD_LIBRARY_PATH=/usr/local/cuda/lib64 NCCL_NVLS_ENABLE=0 WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1 NCCL_SOCKET_IFNAME=lo MASTER_ADDR=127.0.0.1
P=build-gpu/bin/weft-perf
nvidia-smi -L > $OUT/env.log; git log --oneline -1 >> $OUT/env.log 2>&1; date -u >> $OUT/env.log
WEFT_GPU_CTEST_ARGS='-E test_perfgpu' WAG_TEST_TIMEOUT=100 timeout 280 bash tools/gpu-check.sh test > $OUT/test.out 2>&1
grep -E "Passed|Failed|tests passed|FAIL|\*\*\*" $OUT/test.out | tail -14
export WEFT_PERF_NCCL_LIB=$(python3 -c "import nvidia.nccl,os,glob;print(glob.glob(os.path.join(list(nvidia.nccl.__path__)[0],'lib','libnccl.so*'))[0])")
G="--np 2 --mem cuda -d half --graph 20 --peer nccl"
{ timeout 90 $P $G --collective sendrecv -b 1K -e 64M -f 4 --repeat 5
timeout 90 $P $G --collective sendrecv -b 256M -e 1G -f 4 --repeat 5 -n 5 --graph 4 -c 0
timeout 60 $P $G --collective broadcast -b 1K -e 64M -f 4 --repeat 5
timeout 40 $P $G --collective all_reduce -b 256K -e 4M -f 2 --repeat 5; } > $OUT/record.log 2>&1
awk '/Test starting/{print} /^ +[0-9]+ /{print $1, $6, $9, $10, $11, $12, $15, $16, $17}' $OUT/record.log; grep -i "error" $OUT/record.log | head -5
