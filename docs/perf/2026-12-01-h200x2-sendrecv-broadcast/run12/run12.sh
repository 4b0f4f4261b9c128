export LD_LIBRARY_PATH=/usr/local/cuda/lib64 NCCL_NVLS_ENABLE=0 WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1 NCCL_SOCKET_IFNAME=lo MASTER_ADDR=127.0.0.1
P=build-gpu/bin/weft-perf
nvidia-smi -L > $OUT/env.log; git log --oneline -1 >> $OUT/env.log 2>&1; date -u >> $OUT/env.log
WEFT_GPU_CTEST_ARGS='-R test_algo_gpu$|rings_two|direct_two' WAG_TEST_TIMEOUT=100 timeout 200 bash tools/gpu-check.sh test > $OUT/test.out 2>&1
grep -E "Passed|Failed|tests passed|FAIL|\*\*\*" $OUT/test.out | tail -14
export WEFT_PERF_NCCL_LIB=$(python3 -c "import nvidia.nccl,os,glob;print(glob.glob(os.path.join(list(nvidia.nccl.__path__)[0],'lib','libnccl.so*'))[0])")
G="--np 2 --mem cuda -d half --graph 20 --peer nccl --collective sendrecv"
{ for v in X=1 WEFT_ALGO_GPU_P2P_LL_MAX=256K; do echo "== $v"; env $v timeout 90 $P $G -b 1K -e 64M -f 4 --repeat 3; done
echo "== big"; timeout 90 $P $G -b 256M -e 1G -f 4 --repeat 3 -n 5 --graph 4 -c 0; } > $OUT/sr.log 2>&1
awk "/^==/{print} /^ +[0-9]+ /{print \$1, \$6, \$9, \$10, \$11, \$12, \$15}" $OUT/sr.log; grep -i "error" $OUT/sr.log | head -5
timeout 100 $P --np 2 --mem cuda -d half --peer nccl --collective all_reduce -b 256M -e 1G -f 4 --repeat 5 -n 5 --graph 4 -c 0 > $OUT/ar1g.log 2>&1
awk '/^ +[0-9]+ /{print $1, $6, $9, $10, $11, $12, $15, $16, $17}' $OUT/ar1g.log; grep -i "error" $OUT/ar1g.log | head -3
for v in X=1 WEFT_ALGO_GPU_DIRECT_REDUCE_BLOCKS=32 WEFT_ALGO_GPU_DIRECT_REDUCE_BLOCKS=48 WEFT_ALGO_GPU_DIRECT_ALLREDUCE_MIN=2M; do echo "== $v"; env $v timeout 40 $P --np 2 --mem cuda -d half --graph 20 --peer nccl --collective all_reduce -b 512K -e 2M -f 2 --repeat 3; done > $OUT/ar1m.log 2>&1
awk '/^==/{print} /^ +[0-9]+ /{print $1, $6, $10, $11, $12, $15, $16}' $OUT/ar1m.log
for n in 20 200; do timeout 60 $P --np 2 --op pingpong --mem cuda -b 4 -e 4 -n $n; done 2>&1 | grep -E "Round trip|rror"
for c in 8M 32M 64M; do echo "== ce_chunk $c"; WEFT_ALGO_GPU_CE_CHUNK=$c timeout 40 $P --np 2 --mem cuda -d half --collective all_reduce -b 1G -e 1G -n 5 --graph 4 --repeat 3 -c 0 | grep -E "^ +[0-9]|rror"; done
