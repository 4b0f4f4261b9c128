export LD_LIBRARY_PATH=/usr/local/cuda/lib64 NCCL_NVLS_ENABLE=0 WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1 NCCL_SOCKET_IFNAME=lo MASTER_ADDR=127.0.0.1
P=build-gpu/bin/weft-perf
nvidia-smi -L > $OUT/env.log; date -u >> $OUT/env.log; git log --oneline -1 >> $OUT/env.log 2>&1
WEFT_GPU_CTEST_ARGS='-E test_perfgpu' WAG_TEST_TIMEOUT=100 timeout 260 bash tools/gpu-check.sh test > $OUT/test.out 2>&1
grep -E "Passed|Failed|tests passed|FAIL|\*\*\*" $OUT/test.out | tail -40
export WEFT_PERF_NCCL_LIB=$(python3 -c "import nvidia.nccl,os,glob;print(glob.glob(os.path.join(list(nvidia.nccl.__path__)[0],'lib','libnccl.so*'))[0])")
for i in 1 2 3; do timeout 30 $P --np 2 --op pingpong --mem cuda; done > $OUT/pingpong.log 2>&1
grep -iE "us|error" $OUT/pingpong.log | head -30
timeout 60 $P --np 2 --mem cuda --collective broadcast -d half -b 1K -e 1M -f 4 --graph 20 --peer nccl --repeat 5 > $OUT/bcast.log 2>&1
for b in 4 8 16 64; do echo "== p2p_blocks $b"; WEFT_ALGO_GPU_P2P_BLOCKS=$b timeout 60 $P --np 2 --mem cuda --collective sendrecv -d half -b 1K -e 256M -f 4 --graph 20 --peer nccl; done > $OUT/sendrecv.log 2>&1
for m in np mpi; do echo "== allgather $m"; A="--mem cuda --collective all_gather -d half -b 1M -e 1G -f 4 --graph 20 --peer nccl -c 0"
if [ $m = np ]; then timeout 80 $P --np 2 $A; else timeout 80 mpirun --allow-run-as-root --mca oob_tcp_if_include lo --mca btl self,vader -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x WEFT_CORE_BOOTSTRAP_ADDR -x NCCL_SOCKET_IFNAME -x WEFT_PERF_NCCL_LIB -x WEFT_CORE_BOOTSTRAP_ROOT=127.0.0.1:29431 $P $A; fi; done > $OUT/ag.log 2>&1
for f in bcast sendrecv ag; do awk '/Test starting|^==/{print} /^ +[0-9]+ /{print $1, $6, $9, $10, $11, $12, $15, $16, $17}' $OUT/$f.log; grep -i "error" $OUT/$f.log | head -5; done
