export LD_LIBRARY_PATH=/usr/local/cuda/lib64 NCCL_NVLS_ENABLE=0 WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1 NCCL_SOCKET_IFNAME=lo MASTER_ADDR=127.0.0.1
P=build-gpu/bin/weft-perf
WEFT_GPU_CTEST_ARGS='-R algo_gpu' WAG_TEST_TIMEOUT=100 timeout 300 bash tools/gpu-check.sh test > $OUT/test.out 2>&1
export WEFT_PERF_NCCL_LIB=$(python3 -c "import nvidia.nccl,os,glob;print(glob.glob(os.path.join(list(nvidia.nccl.__path__)[0],'lib','libnccl.so*'))[0])")
for m in 1K 0; do
for c in ALLREDUCE REDUCE_SCATTER ALLGATHER BROADCAST ALLTOALL; do export WEFT_ALGO_GPU_DIRECT_${c}_MIN=$m; done
for c in all_reduce all_gather reduce_scatter broadcast alltoall; do
echo "== direct_min $m"; timeout 100 $P --np 2 --mem cuda --collective $c -d half -b 256K -e 16M -f 4 --graph 20 --peer nccl
done > $OUT/sweep-$m.log 2>&1
done
grep -E "Passed|Failed|tests passed|FAIL" $OUT/test.out
for m in 1K 0; do awk '/Test starting/{print} /^ +[0-9]+ /{print $1, $6, $9, $10, $11, $12, $15, $16, $17}' $OUT/sweep-$m.log; grep -i "error" $OUT/sweep-$m.log | head -5; done
