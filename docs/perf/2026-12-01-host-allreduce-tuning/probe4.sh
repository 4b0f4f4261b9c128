#!/usr/bin/env bash
# Probe: 4-rank allreduce, the one-shot's limit (small_max / 3) against reduce-scatter + allgather.
# usage: WEFT_PERF=path/to/weft-perf OUT=dir probe4.sh   (from the source tree's root)
set -u
export WEFT_CONFIG=/dev/null WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1 WEFT_OFI_ADDR=127.0.0.1 WEFT_OFI_IFACE=lo
P=${WEFT_PERF:-build/bin/weft-perf}
mpicc -O2 -o /tmp/mpi_bench tools/mpi_bench.c || exit 1
row() { grep -E "^ +[0-9]" | awk '{printf "%s:%s/%s ", $1/1024, $6, $10} END {print ""}'; }
{
nproc; date -u
for i in 1 2 3 4 5; do
	for v in "S64 WEFT_ALGO_HOST_SMALL_MAX=64K" "S16 WEFT_ALGO_HOST_SMALL_MAX=16K" "S0 WEFT_ALGO_HOST_SMALL_MAX=0"; do
		set -- $v; n=$1; shift
		printf "%s " "$n"; env "$@" timeout 60 $P --np 4 -b 1K -e 64K -f 2 -n 100 -w 10 | row
	done
	printf "M "; timeout 60 mpirun --allow-run-as-root --oversubscribe --mca btl self,vader --mca oob_tcp_if_include lo -np 4 /tmp/mpi_bench --collective all_reduce -b 1K -e 64K -f 2 -n 100 -w 10 -d float | row
done
} 2>&1 | tee ${OUT:-.}/probe4.log
sort -s -k1,1 ${OUT:-.}/probe4.log
