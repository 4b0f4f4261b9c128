#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Transport benchmark on this host: weft-perf's put bandwidth and ping-pong
# latency over each CPU transport (one invocation covers them all), and, as
# the peer figure from the same run, UCX's own ucx_perftest (ucp_put_bw and
# ucp_put_lat) over UCX's shared-memory and tcp transports. Everything stays on
# 127.0.0.1.
#   usage: tools/bench-transports.sh [OUTDIR]    (default /tmp/weft-transports-<date>)
#   WEFT_PERF     weft-perf binary (default: $WEFT_BUILD_DIR/bin/weft-perf, else build/bin/weft-perf)
#   TRANSPORTS    comma list for weft-perf (default ofi,ucx,shm: those it can load)
#   SIZES         sizes for the ucx_perftest rows (default "8 4096 1048576 67108864")
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-/tmp/weft-transports-$(date -u +%Y%m%d-%H%M%S)}
perf=${WEFT_PERF:-${WEFT_BUILD_DIR:-$src/build}/bin/weft-perf}
transports=${TRANSPORTS:-ofi,ucx,shm}
sizes=${SIZES:-8 4096 1048576 67108864}
mkdir -p "$out"

die() { echo "bench-transports: $*" >&2; exit 1; }
[[ -x $perf ]] || die "no weft-perf at $perf (build first: tools/test.sh or cmake --build build)"
command -v ucx_perftest >/dev/null || die "ucx_perftest missing (apt-get install ucx-utils)"

export WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1
export WEFT_UCX_NET_DEVICES=lo

{
	echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "host: $(uname -srm), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
	echo "ucx: $(ucx_info -v 2>/dev/null | head -1)"
	echo "libfabric: $(fi_info --version 2>/dev/null | head -1)"
} | tee "$out/env.txt"

for op in pingpong put; do
	echo
	echo "## weft-perf --op $op --transport $transports"
	"$perf" --np 2 --op "$op" --transport "$transports" -b 8 -e 64M -f 8 -w 20 -n 200 2>&1 | tee "$out/weft-$op.log"
done

# ucx_perftest: a server in the background, the client prints a "Final:" row.
# Columns of interest: latency average (us) for put_lat; bandwidth average
# (MB/s) for put_bw.
port=$((20000 + RANDOM % 20000))
perftest() { # <tls> <test> <size> <iters>
	local tls=$1 test=$2 size=$3 iters=$4
	UCX_TLS=$tls ucx_perftest -p "$port" >/dev/null 2>&1 &
	local srv=$!
	sleep 0.5
	local line
	line=$(UCX_TLS=$tls timeout 60 ucx_perftest 127.0.0.1 -p "$port" -t "$test" -s "$size" -n "$iters" -w 100 2>&1 |
		grep '^Final:' || true)
	wait "$srv" 2>/dev/null || true
	port=$((port + 1))
	echo "$line"
}

echo
echo "## ucx_perftest (peer figure, same run)"
printf '| tls | size (B) | ucp_put_lat us (one way) | ucp_put_bw MB/s |\n|---|---:|---:|---:|\n' | tee "$out/ucx_perftest.md"
for tls in sm,self tcp,self; do
	for s in $sizes; do
		iters=20000
		((s >= 1048576)) && iters=200
		lat=$(perftest "$tls" ucp_put_lat "$s" "$iters" | awk '{print $4}')
		bw=$(perftest "$tls" ucp_put_bw "$s" "$iters" | awk '{print $6}')
		printf '| %s | %s | %s | %s |\n' "$tls" "$s" "${lat:-?}" "${bw:-?}" | tee -a "$out/ucx_perftest.md"
	done
done
echo
echo "logs: $out"
