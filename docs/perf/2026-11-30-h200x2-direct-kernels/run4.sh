export LD_LIBRARY_PATH=/usr/local/cuda/lib64 NCCL_NVLS_ENABLE=0 WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1 NCCL_SOCKET_IFNAME=lo MASTER_ADDR=127.0.0.1
P=build-gpu/bin/weft-perf
WEFT_GPU_CTEST_ARGS='-E test_perfgpu' WAG_TEST_TIMEOUT=100 timeout 300 bash tools/gpu-check.sh test > $OUT/test.out 2>&1
grep -E "Passed|Failed|tests passed|FAIL|\*\*\*" $OUT/test.out
export WEFT_PERF_NCCL_LIB=$(python3 -c "import nvidia.nccl,os,glob;print(glob.glob(os.path.join(list(nvidia.nccl.__path__)[0],'lib','libnccl.so*'))[0])")
R="--np 2 --mem cuda -d half -b 256M -e 1G -f 4 --graph 20 --peer nccl -c 0 -w 2 -n 10"
for v in X=1 WEFT_ALGO_GPU_CE_ALLREDUCE_MIN=0 "WEFT_ALGO_GPU_CE_ALLREDUCE_MIN=0 WEFT_ALGO_GPU_DIRECT_BLOCKS=128" "WEFT_ALGO_GPU_CE_ALLREDUCE_MIN=0 WEFT_ALGO_GPU_DIRECT_BLOCKS=32"; do
echo "== all_reduce $v"; env $v timeout 60 $P --collective all_reduce $R | grep -E "^ +[0-9]|rror"; done > $OUT/big.log 2>&1
for c in all_gather reduce_scatter broadcast alltoall; do for v in X=1 WEFT_ALGO_GPU_CE_${c^^}_MIN=0; do
v=${v/ALL_GATHER/ALLGATHER}; echo "== $c $v"; env $v timeout 60 $P --collective $c $R | grep -E "^ +[0-9]|rror"; done; done >> $OUT/big.log 2>&1
cat $OUT/big.log
