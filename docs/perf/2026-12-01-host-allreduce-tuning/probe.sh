#!/usr/bin/env bash
# Probe: 2-rank allreduce, the one-shot's push limit and where reduce-scatter + allgather takes over.
# usage: WEFT_PERF=path/to/weft-perf OUT=dir probe.sh   (from the source tree's root)
set -u
export WEFT_CONFIG=/dev/null WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1 WEFT_OFI_ADDR=127.0.0.1 WEFT_OFI_IFACE=lo
P=${WEFT_PERF:-build/bin/weft-perf}
mpicc -O2 -o /tmp/mpi_bench tools/mpi_bench.c || exit 1
row() { grep -E "^ +[0-9]" | awk '{printf "%s:%s/%s ", $1/1024, $6, $10} END {print ""}'; }
{
nproc; date -u
for i in 1 2 3 4 5; do
	# A: small_max 64K, push to 4K (the defaults before this record); B: the one-shot pushes up
	# to 64K; C: the build's defaults (after it: 16K, 16K); D: no one-shot (reduce-scatter + allgather).
	for v in "A WEFT_ALGO_HOST_SMALL_MAX=64K WEFT_ALGO_HOST_ONESHOT_PUSH_MAX=4K" \
		"B WEFT_ALGO_HOST_SMALL_MAX=64K WEFT_ALGO_HOST_ONESHOT_PUSH_MAX=64K" "C" "D WEFT_ALGO_HOST_SMALL_MAX=0"; do
		set -- $v; n=$1; shift
		printf "%s " "$n"; env "$@" timeout 60 $P --np 2 -b 1K -e 256K -f 2 -n 300 -w 30 | row
	done
	printf "M "; timeout 60 mpirun --allow-run-as-root --oversubscribe --mca btl self,vader --mca oob_tcp_if_include lo -np 2 /tmp/mpi_bench --collective all_reduce -b 1K -e 256K -f 2 -n 300 -w 30 -d float | row
done
} 2>&1 | tee ${OUT:-.}/probe.log
sort -s -k1,1 ${OUT:-.}/probe.log
