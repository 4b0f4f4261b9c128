export LD_LIBRARY_PATH=/usr/local/cuda/lib64 NCCL_NVLS_ENABLE=0 WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1 NCCL_SOCKET_IFNAME=lo MASTER_ADDR=127.0.0.1
P=build-gpu/bin/weft-perf
git log --oneline -1 > $OUT/env.log 2>&1; date -u >> $OUT/env.log
WEFT_GPU_CTEST_ARGS='-E test_perfgpu' WAG_TEST_TIMEOUT=100 timeout 300 bash tools/gpu-check.sh test > $OUT/test.out 2>&1
grep -E "Passed|Failed|tests passed|FAIL|\*\*\*" $OUT/test.out | tail -20
export WEFT_PERF_NCCL_LIB=$(python3 -c "import nvidia.nccl,os,glob;print(glob.glob(os.path.join(list(nvidia.nccl.__path__)[0],'lib','libnccl.so*'))[0])")
S="--np 2 --mem cuda --collective sendrecv -d half -b 1K -e 256M -f 4 --graph 20 --peer nccl"
for v in X=1 WEFT_ALGO_GPU_P2P_LL_MAX=256K WEFT_ALGO_GPU_P2P_LL_MAX=0; do echo "== $v"; env $v timeout 60 $P $S; done > $OUT/sr.log 2>&1
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,TUNING,P2P timeout 60 $P --np 2 --mem cuda --collective all_gather -d half -b 16M -e 16M --graph 20 --peer nccl -c 0 > $OUT/ncclinfo.log 2>&1
awk '/^==/{print} /^ +[0-9]+ /{print $1, $6, $9, $10, $11, $12}' $OUT/sr.log; grep -i "error" $OUT/sr.log | head -5
grep -E "channels|NCCL_|via P2P|P2P/|Connected|nvls|NVLS|Tuner|ring|version" $OUT/ncclinfo.log | sort | uniq -c | sort -rn | head -25
