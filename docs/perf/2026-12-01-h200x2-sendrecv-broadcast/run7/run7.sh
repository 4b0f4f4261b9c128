export LD_LIBRARY_PATH=/usr/local/cuda/lib64 NCCL_NVLS_ENABLE=0 WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1 NCCL_SOCKET_IFNAME=lo MASTER_ADDR=127.0.0.1
P=build-gpu/bin/weft-perf
export WEFT_PERF_NCCL_LIB=$(python3 -c "import nvidia.nccl,os,glob;print(glob.glob(os.path.join(list(nvidia.nccl.__path__)[0],'lib','libnccl.so*'))[0])")
S="--np 2 --mem cuda --collective sendrecv -d half -b 1M -e 256M -f 4 --graph 20"
for t in 64K 256K 1M; do for d in 4 8; do for b in 21 44; do
v="WEFT_ALGO_GPU_TILE=$t WEFT_ALGO_GPU_DEPTH=$d WEFT_ALGO_GPU_P2P_BLOCKS=64"; [ $b = 44 ] && v="$v WEFT_ALGO_GPU_DIRECT_BLOCKS=132"
echo "== $v"; env $v timeout 40 $P $S; done; done; done > $OUT/sr.log 2>&1
A="--np 2 --mem cuda --collective all_gather -d half -b 1M -e 1G -f 4 --graph 20 --peer nccl -c 0"
for v in X=1 "WEFT_ALGO_GPU_DIRECT_ALLGATHER_MIN=0 WEFT_ALGO_GPU_CE_ALLGATHER_MIN=0" NCCL_GRAPH_REGISTER=0; do
echo "== $v"; env $v timeout 60 $P $A; done > $OUT/ag.log 2>&1
for f in sr ag; do awk '/^==/{print} /^ +[0-9]+ /{print $1, $6, $9, $10, $11, $12, $15, $16, $17}' $OUT/$f.log; grep -i "error" $OUT/$f.log | head -5; done
