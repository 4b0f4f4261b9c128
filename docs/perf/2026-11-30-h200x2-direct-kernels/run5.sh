export LD_LIBRARY_PATH=/usr/local/cuda/lib64 NCCL_NVLS_ENABLE=0 WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1 NCCL_SOCKET_IFNAME=lo MASTER_ADDR=127.0.0.1
P=build-gpu/bin/weft-perf
WEFT_GPU_CTEST_ARGS='-R test_algo_gpu$|direct_two|algo_gpu_graph' WAG_TEST_TIMEOUT=100 timeout 150 bash tools/gpu-check.sh test > $OUT/test.out 2>&1
grep -E "Passed|Failed|tests passed" $OUT/test.out
export WEFT_PERF_NCCL_LIB=$(python3 -c "import nvidia.nccl,os,glob;print(glob.glob(os.path.join(list(nvidia.nccl.__path__)[0],'lib','libnccl.so*'))[0])")
nvidia-smi -L > $OUT/record.log; date -u >> $OUT/record.log
for c in all_reduce all_gather reduce_scatter broadcast alltoall; do
timeout 100 $P --np 2 --mem cuda --collective $c -d half -b 1K -e 64M -f 4 --graph 20 --peer nccl --repeat 5
timeout 100 $P --np 2 --mem cuda --collective $c -d half -b 256M -e 1G -f 4 --graph 20 --peer nccl --repeat 5 -c 0
done >> $OUT/record.log 2>&1
awk '/Test starting/{print} /^ +[0-9]+ /{print $1, $6, $9, $10, $11, $12, $15, $16, $17}' $OUT/record.log; grep -ci error $OUT/record.log
