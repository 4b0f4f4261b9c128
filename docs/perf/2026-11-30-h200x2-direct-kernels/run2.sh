export LD_LIBRARY_PATH=/usr/local/cuda/lib64 NCCL_NVLS_ENABLE=0 WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1 NCCL_SOCKET_IFNAME=lo MASTER_ADDR=127.0.0.1
P=build-gpu/bin/weft-perf
export WEFT_PERF_NCCL_LIB=$(python3 -c "import nvidia.nccl,os,glob;print(glob.glob(os.path.join(list(nvidia.nccl.__path__)[0],'lib','libnccl.so*'))[0])")
for v in X=1 WEFT_PERF_GPU_PP_THREADS=1 WEFT_PERF_GPU_LL_SHIFT=4096 WEFT_PERF_GPU_LL_SHIFT=65536 WEFT_PERF_GPU_LL_SHIFT=1048576 WEFT_PERF_GPU_LL_SHIFT=2097152; do echo "== $v"; env $v timeout 30 $P --np 2 --op pingpong --mem cuda -b 4 -e 8 | tail -3; done > $OUT/pp.log 2>&1
for c in ALLREDUCE REDUCE_SCATTER ALLGATHER BROADCAST ALLTOALL; do export WEFT_ALGO_GPU_DIRECT_${c}_MIN=1K; done
for c in all_reduce all_gather reduce_scatter broadcast alltoall; do
timeout 100 $P --np 2 --mem cuda --collective $c -d half -b 16K -e 16M -f 4 --graph 20 --peer nccl
timeout 60 $P --np 2 --mem cuda --collective $c -d half -b 64M -e 256M -f 4 --graph 20 --peer nccl -c 0
done > $OUT/sweep.log 2>&1
for c in all_reduce all_gather reduce_scatter; do
WEFT_ALGO_GPU_CE_ALLREDUCE_MIN=0 WEFT_ALGO_GPU_CE_ALLGATHER_MIN=0 WEFT_ALGO_GPU_CE_REDUCE_SCATTER_MIN=0 timeout 60 $P --np 2 --mem cuda --collective $c -d half -b 1G -e 1G --graph 20 --peer nccl -c 0 -w 2 -n 10
done > $OUT/g1.log 2>&1
WEFT_ALGO_GPU_CE_ALLREDUCE_MIN=256M timeout 60 $P --np 2 --mem cuda -d half -b 1G -e 1G -c 0 -w 2 -n 5 > $OUT/arce.log 2>&1
WEFT_ALGO_GPU_CE_ALLREDUCE_MIN=256M timeout 60 $P --np 2 --mem cuda -d half -b 1G -e 1G -c 0 -w 2 -n 5 --graph 5 >> $OUT/arce.log 2>&1
cat $OUT/pp.log; grep -h -v "^#" $OUT/sweep.log $OUT/g1.log | head -80; tail -5 $OUT/arce.log
