#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# GPU check on the two-H200 machine: everything a change to GPU code (or to how
# it is selected) must pass before it lands. Stages, each timed:
#   build      the GPU targets (nvlink, algo-gpu, their tests and benches, libweft_nccl)
#   test       every gpu-labelled test with a GPU required (nvlink, device channels,
#              algo-gpu with 2 ranks, rings only, 3 and 4 ranks several per GPU), and
#              host collectives (test_algo_host) with the GPU transports open: every
#              open transport takes part in a host buffer's exchange
#   hier       the cross-host algorithms on device buffers (test_algo_gpu_hier_*):
#              test hosts over ofi and ucx tcp, 2x2, nvlink forbidden; logs the
#              machine's libfabric and UCX versions
#   xhost      cross-host figures: 2 namespaces over veth, ofi and ucx tcp, host against
#              device buffers and the put ceiling; shm with nvlink forbidden
#              (XH_TPS, XH_COLLS narrow it; with XH_TPS the shm part is left out)
#   xconf      weft-plugin-check on ofi and ucx across 2 namespaces, GPU required
#              (CUDA buffers through staging)
#   xtorch     tests/torch/weft_torch_check.py across 2 namespaces (torchrun per
#              namespace), 1 and 2 ranks a host, over ofi then ucx
#   bench      weft-gpu-bench: nvlink put bandwidth and ping-pong latency, then the
#              same figures through the public API: weft-perf --op pingpong|put
#              --mem cuda (libweft-perf-gpu.so)
#   algo-bench weft-algo-gpu-bench, with NCCL's column when PyTorch's NCCL is found
#   perf       weft-perf --mem cuda: collectives against NCCL in the same run
#              (--peer nccl, plain and --graph)
#   sweep      every collective against NCCL, graphs of 20, half, 1K..1G
#   record     the same, medians of 5 alternating runs (docs/perf's records);
#              1 GiB rows with 20 calls a measurement, unchecked
#   ce-diag    the copy-engine algorithms' open questions (no NCCL in the process)
#   nccl       weft-nccl-driver on device buffers: forked ranks, ncclCommInitAll
#              with groups, CUDA-graph-captured calls, and under mpirun
#   torch      tests/torch/weft_torch_check.py under torchrun with libweft_nccl preloaded,
#              2 ranks on one GPU (WEFT_TORCH_GPUS=2: one a GPU): c10d collectives on every dtype, premul_sum, avg,
#              two groups, a CUDA graph, compiled functional collectives, DDP and
#              FSDP2 steps against a one-process reference; then a shorter set
#              with TORCH_NCCL_USE_COMM_NONBLOCKING=1
#   pgtorch    tests/torch/weft_pg_check.py under torchrun: the Python package's
#              torch.distributed backend "weft" (no NCCL), 2 ranks on one GPU, every
#              c10d collective on CPU and CUDA tensors, an async all_reduce on a side
#              stream, new_group, DDP; libweft of this build, the package from python/
#   win        windows and ncclMemAlloc: test_nccl_win_gpu, then 1 MiB allreduce without a
#              graph, 2 ranks, medians of 5 alternating runs: the default choice, and
#              allreduce-direct on cudaMalloc, ncclMemAlloc, and windows of either
#   plugin-check  weft-plugin-check on nvlink (its CUDA-memory checks) and on
#              algo-gpu (the pack checks on device buffers), 2 ranks
#   plan       algo-plan's device interpreter: its GPU tests (test_plan_gpu*),
#              weft-plan-gpu-bench (one rank, a plan against a native kernel, 1K..1G,
#              then where a plan call's time goes: its graph nodes, the kernel alone
#              and in variants, its per-phase clock stamps),
#              then weft-perf with 2 ranks on one GPU, each plan against algo-gpu's
#              native kernel for the same algorithm, put first by `prefer` rules, 1K..64M
#   checkcost  the call check's cost on the host's cores: weft-perf allreduce at 8 B
#              and 1 KiB over shm, host buffers, 2 and 8 ranks (WEFT_CHECKCOST_NPS),
#              5 rounds (WEFT_CHECKCOST_RUNS) alternating check_calls on and off; medians
#   pycost     the Python package's cost per call (percall.py beside weft-perf's 4 B
#              allreduce, 5 rounds), then 4 B all_reduce through the torch backend
#              "weft" and through ProcessGroupNCCL over libweft_nccl.so (weft_percall.py)
# Default: build test hier plugin-check bench nccl torch. Logs go to $OUT when set (the device
# machine), else to build-gpu/logs. NVLink multicast stays off throughout.
# A tree built elsewhere at the same path can be run without the build stage, and
# so can a build packed by tools/gpu-carry.sh into .gpubuild/ (carried to the device
# machine): its recorded paths are linked to it here, and the build stage is skipped.
# Usage: tools/gpu-check.sh [build] [test] [hier] [xhost] [xconf] [xtorch] [plugin-check] [bench] [algo-bench] [perf] [sweep] [record] [ce-diag] [nccl] [torch] [pgtorch] [plan] [win] [checkcost] [pycost]
set -uo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$src" || exit
stages=("$@")
((${#stages[@]})) || stages=(build test hier plugin-check bench nccl torch)
# A carried build (tools/gpu-carry.sh) holds absolute paths of the machine that
# built it (ctest's commands and files, the programs' RPATHs): link them here.
carried=0
if [[ -f .gpubuild/ORIGIN && -z ${WEFT_GPU_BUILD:-} ]]; then
	read -r osrc obuild <.gpubuild/ORIGIN
	[[ -e $osrc ]] || { mkdir -p "$(dirname "$osrc")" && ln -s "$src" "$osrc"; }
	[[ -e $obuild ]] || { mkdir -p "$(dirname "$obuild")" && ln -s "$src/.gpubuild" "$obuild"; }
	export WEFT_GPU_BUILD=$obuild
	carried=1
	echo "gpu-check: the build carried in .gpubuild, made at $obuild"
fi
bdir=${WEFT_GPU_BUILD:-$src/build-gpu}
logs=${OUT:-$bdir/logs}
mkdir -p "$logs"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1 WEFT_OFI_ADDR=127.0.0.1 WEFT_OFI_IFACE=lo
export NCCL_SOCKET_IFNAME=lo NCCL_COMM_ID_ADDR=127.0.0.1 MASTER_ADDR=127.0.0.1
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
jobs=$(nproc 2>/dev/null || echo 4)
((jobs > 16)) && jobs=16

# Check (and pkg-config) from Debian .debs carried in .deb/ when the host has none.
if ! pkg-config --exists check 2>/dev/null && [[ -d .deb ]] && ls .deb/*.deb >/dev/null 2>&1; then
	priv=/tmp/weft-deps
	rm -rf "$priv" && mkdir -p "$priv"
	for f in .deb/*.deb; do dpkg -x "$f" "$priv"; done
	# The -dev packages' lib*.so links name Debian's runtime files: point
	# them at this machine's own libraries instead (built against the carried
	# headers, run against what the machine has).
	for l in "$priv"/usr/lib/x86_64-linux-gnu/lib*.so; do
		[[ -L $l && ! -e $l ]] || continue
		own=$(ldconfig -p | awk -v n="$(basename "$l")." 'index($1, n) == 1 { print $NF; exit }')
		[[ -n $own ]] && ln -sf "$own" "$l" && echo "gpu-check: $(basename "$l") -> $own"
	done
	for pc in "$priv"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc; do
		sed -i -E "s|^prefix *=.*|prefix=$priv/usr|; s|^libdir *=.*|libdir=$priv/usr/lib/x86_64-linux-gnu|; s|^includedir *=.*|includedir=$priv/usr/include|" "$pc"
	done
	# libsubunit.so.0 is needed at run time too, so the library path is always set.
	export LD_LIBRARY_PATH=$priv/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	command -v pkg-config >/dev/null || export PATH=$priv/usr/bin:$PATH
	export PKG_CONFIG_PATH=$priv/usr/lib/x86_64-linux-gnu/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
	export CMAKE_PREFIX_PATH=$priv/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
	echo "gpu-check: Check from carried .debs in $priv ($(pkg-config --modversion check 2>&1))"
fi

# `ip` from Debian's iproute2 carried in .deb/iproute2/ (with its libraries)
# where the machine has none: a wrapper on PATH gives only `ip` their library
# path, so nothing else runs against the carried libraries.
if ! command -v ip >/dev/null && [[ -d .deb/iproute2 ]] && ls .deb/iproute2/*.deb >/dev/null 2>&1; then
	ipd=/tmp/weft-ip
	rm -rf "$ipd" && mkdir -p "$ipd/wrap"
	for f in .deb/iproute2/*.deb; do dpkg -x "$f" "$ipd"; done
	printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/lib/x86_64-linux-gnu:%s/usr/lib/x86_64-linux-gnu exec %s/bin/ip "$@"\n' \
		"$ipd" "$ipd" "$ipd" >"$ipd/wrap/ip"
	chmod +x "$ipd/wrap/ip"
	export PATH=$ipd/wrap:$PATH
	echo "gpu-check: ip from carried .debs ($(ip -V 2>&1))"
fi

rc=0
summary=()
stage() {
	local name=$1
	shift
	local t0=$SECONDS
	echo "=== stage $name"
	"$@" 2>&1 | tee "$logs/$name.log"
	local r=${PIPESTATUS[0]}
	summary+=("$(printf '%-6s %-4s %4ds' "$name" "$([[ $r == 0 ]] && echo ok || echo FAIL)" $((SECONDS - t0)))")
	((r == 0)) || rc=1
	return "$r"
}

# The network transports, where their headers are here (carried .debs).
net_targets() {
	pkg-config --exists libfabric 2>/dev/null && echo weft-plugin-ofi
	pkg-config --exists ucx 2>/dev/null && echo weft-plugin-ucx
}

do_build() {
	cmake -S "$src" -B "$bdir" -DCMAKE_BUILD_TYPE="${WEFT_GPU_BUILD_TYPE:-RelWithDebInfo}" \
		-DWEFT_REQUIRE_PLUGINS=nvlink,algo-gpu -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES=90 &&
		if [[ ${WEFT_GPU_FULL_BUILD:-0} == 1 ]]; then
			cmake --build "$bdir" -j "$jobs"
		else
			# The GPU targets alone: the rest of the tree is CI's business.
			# shellcheck disable=SC2086,SC2046 # lists of target names
			cmake --build "$bdir" -j "$jobs" --target ${WEFT_GPU_TARGETS:-weft-plugin-nvlink weft-plugin-algo-gpu \
				weft-plugin-shm weft-plugin-algo-host test_algo_host test_nvlink_gpu test_devchan_gpu test_nvlink_nodev test_algo_gpu \
				test_algo_gpu_sched weft-gpu-bench weft-algo-gpu-bench weft-info weft-perf weft-perf-gpu test_perfgpu_gpu \
				weft_nccl weft-nccl-driver weft-plugin-check weft-conformance weft-pack-conformance test_ib_dmabuf_gpu \
				test_nccl_win_gpu} \
				$(net_targets)
		fi &&
		tools/check-no-multicast.sh "$bdir"
}

# Each forked group of algo-gpu ranks is bounded by WAG_TEST_TIMEOUT seconds,
# so a hung kernel fails its case instead of eating the lease.
do_test() {
	nvidia-smi -L || true
	nvidia-smi topo -m || true
	# shellcheck disable=SC2086 # extra ctest arguments, e.g. -R or -E filters
	WEFT_REQUIRE_GPU=1 WAG_TEST_TIMEOUT=${WAG_TEST_TIMEOUT:-120} ctest --test-dir "$bdir" -L gpu \
		-E test_algo_gpu_hier --output-on-failure --timeout 900 ${WEFT_GPU_CTEST_ARGS:-} &&
		ctest --test-dir "$bdir" -R 'nvlink_nodev|test_algo_gpu_sched|test_algo_host' --output-on-failure
}
# The cross-host algorithms on device buffers: test hosts over ofi tcp and
# ucx tcp, 2x2 with nvlink inside a host, and nvlink forbidden (shm); the
# same with the hosts in network namespaces joined by veth.
do_hier() {
	python3 - <<'PY' || true
import ctypes
try:
    v = ctypes.CDLL("libfabric.so.1").fi_version()
    print("libfabric runtime: fi_version() = %d.%d" % (v >> 16, v & 0xffff))
except OSError as e:
    print("libfabric runtime:", e)
try:
    f = ctypes.CDLL("libucp.so.0").ucp_get_version_string
    f.restype = ctypes.c_char_p
    print("UCX runtime: ucp_get_version_string() =", f().decode())
except OSError as e:
    print("UCX runtime:", e)
PY
	WEFT_REQUIRE_GPU=1 WAG_TEST_TIMEOUT=${WAG_TEST_TIMEOUT:-300} ctest --test-dir "$bdir" -R 'test_algo_gpu_hier' \
		--output-on-failure --timeout 900 ${WEFT_GPU_CTEST_ARGS:-}
}

# The cross-host figures: two namespaces joined by veth, one rank each, by
# hand (RANK/WORLD_SIZE, the root on rank 0's veth address). For ofi and ucx
# tcp: host-buffer allreduce and allgather (algo-host), the same on device
# buffers (algo-gpu's *-hier), and the transport's put bandwidth (the
# ceiling). Then through shm on one namespace with nvlink forbidden.
xh_pair() { # tp args...: rank 0 in namespace a, rank 1 in b; rank 0's output
	local tp=$1 i r=0 pid=()
	shift
	for i in 0 1; do
		ip netns exec "${xh_ns[i]}" env RANK=$i WORLD_SIZE=2 WEFT_CORE_BOOTSTRAP_ROOT="${xh_addr[0]}:29461" \
			WEFT_CORE_BOOTSTRAP_SECRET=xhost-bench WEFT_CORE_BOOTSTRAP_ADDR="${xh_addr[i]}" \
			WEFT_OFI_ADDR="${xh_addr[i]}" WEFT_UCX_NET_DEVICES="${xh_veth[i]}" \
			WEFT_CONFIG="$logs/xh-$tp.conf" timeout "${WEFT_XH_TIMEOUT:-120}" "$bdir/bin/weft-perf" "$@" \
			>"$logs/xh-rank$i.out" 2>&1 &
		pid[i]=$!
	done
	for i in 0 1; do
		wait "${pid[i]}" || { echo "xhost: rank $i exited $?"; r=1; }
	done
	cat "$logs/xh-rank0.out"
	grep -i "error" "$logs/xh-rank1.out" | head -5
	# Errors are for errors (issue 30 item 5): a run that succeeded logs none.
	if ((r == 0)) && grep -h "^weft [0-9]* error " "$logs"/xh-rank[01].out; then
		echo "xhost: the run succeeded but logged the error lines above"
		r=1
	fi
	return $r
}

# Two simulated hosts: network namespaces joined by a veth pair.
xh_up() {
	xh_ns=(wxbencha wxbenchb) xh_veth=(wxba wxbb) xh_addr=(10.251.7.1 10.251.7.2)
	ip netns delete "${xh_ns[0]}" 2>/dev/null
	ip netns delete "${xh_ns[1]}" 2>/dev/null
	ip netns add "${xh_ns[0]}" && ip netns add "${xh_ns[1]}" &&
		ip link add "${xh_veth[0]}" netns "${xh_ns[0]}" type veth peer name "${xh_veth[1]}" netns "${xh_ns[1]}" || return 1
	for i in 0 1; do
		ip -n "${xh_ns[i]}" addr add "${xh_addr[i]}/30" dev "${xh_veth[i]}" &&
			ip -n "${xh_ns[i]}" link set "${xh_veth[i]}" up && ip -n "${xh_ns[i]}" link set lo up || return 1
	done
	sleep 2
}

xh_down() {
	ip netns delete "${xh_ns[0]}"
	ip netns delete "${xh_ns[1]}"
}

# XH_TPS and XH_COLLS narrow the run (default: ofi ucx; allreduce allgather).
do_xhost() {
	local tp c r=0 sizes=(-b 16M -e 256M -f 2 -w 3 -n 10)
	xh_up || return 1
	for tp in ${XH_TPS:-ofi ucx}; do
		printf '[transport]\nrequire %s when peer=other-host\n' "$tp" >"$logs/xh-$tp.conf"
		echo "=== $tp: put bandwidth (host memory)"
		xh_pair "$tp" --op put --transport "$tp" --mem host "${sizes[@]}" || r=1
		for c in ${XH_COLLS:-allreduce allgather}; do
			echo "=== $tp: $c, host buffers"
			xh_pair "$tp" --collective "$c" --mem host "${sizes[@]}" || r=1
			echo "=== $tp: $c, device buffers"
			xh_pair "$tp" --collective "$c" --mem cuda "${sizes[@]}" || r=1
		done
		echo "=== $tp: allreduce 1K..64K, host buffers, then device buffers"
		xh_pair "$tp" --collective allreduce --mem host -b 1K -e 64K -f 4 -w 5 -n 50 || r=1
		xh_pair "$tp" --collective allreduce --mem cuda -b 1K -e 64K -f 4 -w 5 -n 50 || r=1
	done
	xh_down
	[[ -n ${XH_TPS:-} ]] && return $r
	printf '[transport]\nforbid nvlink\n' >"$logs/xh-shm.conf"
	echo "=== shm, nvlink forbidden: allreduce, host buffers, then device buffers"
	WEFT_CONFIG="$logs/xh-shm.conf" "$bdir/bin/weft-perf" --np 2 --collective allreduce --mem host -b 16M -e 256M -f 2 \
		-w 3 -n 10 || r=1
	WEFT_CONFIG="$logs/xh-shm.conf" "$bdir/bin/weft-perf" --np 2 --collective allreduce --mem cuda -b 16M -e 256M -f 2 \
		-w 3 -n 10 || r=1
	return $r
}


# The transport conformance checks across two namespaces, CUDA buffers
# included: neither tcp provider registers device memory, so those go
# through staging. A GPU is required, so a skipped CUDA check fails.
do_xconf() {
	local tp r=0 t="$bdir/bin/weft-plugin-check"
	for tp in ofi ucx; do
		WEFT_REQUIRE_GPU=1 timeout "${WEFT_XCONF_TIMEOUT:-150}" "$t" --np 2 --hosts 2 --hosts-mode netns \
			"$bdir/lib/weft/libweft-$tp.so" || r=1
	done
	return $r
}

# PyTorch across two simulated hosts: one torchrun per namespace (--nnodes
# 2), libweft_nccl preloaded, the bootstrap, the rendezvous and the network
# transport on the veth addresses; 1 rank a host, then 2 (NVLink inside).
do_xtorch() {
	local tp n i r=0 pid=()
	xh_up || return 1
	for tp in ${XH_TPS:-ofi ucx}; do
		printf '[transport]\nrequire %s when peer=other-host\n' "$tp" >"$logs/xh-$tp.conf"
		for n in 1 2; do
			echo "=== torch over $tp: 2 hosts x $n rank(s)"
			for i in 0 1; do
				ip netns exec "${xh_ns[i]}" env WEFT_CORE_BOOTSTRAP_ADDR="${xh_addr[i]}" \
					WEFT_OFI_ADDR="${xh_addr[i]}" WEFT_OFI_IFACE="${xh_veth[i]}" \
					WEFT_UCX_NET_DEVICES="${xh_veth[i]}" NCCL_SOCKET_IFNAME="${xh_veth[i]}" \
					MASTER_ADDR="${xh_addr[0]}" WEFT_CONFIG="$logs/xh-$tp.conf" WEFT_NCCL_LOG=info \
					LD_PRELOAD="$bdir/lib/libweft_nccl.so.2" timeout "${WEFT_TORCH_STAGE_TIMEOUT:-180}" \
					python3 -m torch.distributed.run --nnodes 2 --node-rank "$i" --nproc-per-node "$n" \
					--master-addr "${xh_addr[0]}" --master-port 29541 "$src/tests/torch/weft_torch_check.py" \
					>"$logs/xtorch-$tp-$n-host$i.out" 2>&1 &
				pid[i]=$!
			done
			for i in 0 1; do
				wait "${pid[i]}" || { echo "xtorch: $tp, host $i exited $?"; r=1; }
			done
			grep -h "FAIL\|passed\|failed\|Error" "$logs/xtorch-$tp-$n-host"[01].out | tail -8
		done
	done
	xh_down
	return $r
}

# Each command runs even when one before it failed; WEFT_PERF_GPU_ARGS adds
# flags to the two weft-perf runs (e.g. -b 1M -e 1G -f 4 for a size sweep).
do_bench() {
	local r=0 p="$bdir/bin/weft-perf" t=${WEFT_PERF_BENCH_TIMEOUT:-300}
	"$bdir/bin/weft-gpu-bench" "${WEFT_GPU_BENCH_BYTES:-1073741824}" || r=1
	# shellcheck disable=SC2086 # extra flags
	timeout "$t" "$p" --np 2 --op pingpong --mem cuda ${WEFT_PERF_GPU_ARGS:-} || r=1
	# shellcheck disable=SC2086 # extra flags
	timeout "$t" "$p" --np 2 --op put --mem cuda ${WEFT_PERF_GPU_ARGS:-} || r=1
	return $r
}

# PyTorch's own libnccl.so.2 (the peer column of the benchmarks).
find_nccl() {
	python3 - <<'PY' 2>/dev/null
import glob, os
cands = []
try:
    import nvidia.nccl as m
    for p in list(getattr(m, "__path__", [])):
        cands += glob.glob(os.path.join(p, "lib", "libnccl.so*"))
except Exception:
    pass
try:
    import torch
    cands += glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "libnccl.so*"))
except Exception:
    pass
print(cands[0] if cands else "")
PY
}

do_algo_bench() {
	local lib
	lib=$(find_nccl)
	echo "NCCL library: ${lib:-not found}"
	WAG_NCCL_LIB=$lib timeout "${WEFT_ALGO_BENCH_TIMEOUT:-240}" "$bdir/bin/weft-algo-gpu-bench" \
		"${WEFT_ALGO_BENCH_BYTES:-1073741824}"
}

# weft-perf's peer for the stage that calls it: PyTorch's NCCL, when found,
# as peer_args (--peer nccl), with the CUDA runtime on the library path.
nccl_peer() {
	local lib
	lib=$(find_nccl)
	echo "NCCL library: ${lib:-not found}"
	export WEFT_PERF_NCCL_LIB=$lib LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	peer_args=()
	[[ -z $lib ]] || peer_args=(--peer nccl)
}

# weft-perf on device memory. WEFT_PERF_ARGS adds flags (e.g. --repeat 5 for
# a record); the sizes and collectives default to a quick sweep.
do_perf() {
	local p="$bdir/bin/weft-perf" t=${WEFT_PERF_STAGE_TIMEOUT:-120}
	nccl_peer
	# shellcheck disable=SC2086 # extra flags
	timeout "$t" "$p" --np 2 --mem cuda -d half -b 1K -e 1G -f 8 "${peer_args[@]}" ${WEFT_PERF_ARGS:-} &&
		timeout "$t" "$p" --np 2 --mem cuda -d half -b 1K -e 64M -f 8 --graph 5 "${peer_args[@]}" ${WEFT_PERF_ARGS:-} &&
		timeout "$t" "$p" --np 2 --mem cuda --collective all_gather -b 1K -e 1G -f 8 "${peer_args[@]}"
}

# Every collective against NCCL as the anchors table was measured (graphs of
# 20 calls, half, out of place), sizes and repeats from WEFT_SWEEP_ARGS.
do_sweep() {
	local p="$bdir/bin/weft-perf" t=${WEFT_PERF_STAGE_TIMEOUT:-120} c r=0
	nccl_peer
	for c in ${WEFT_SWEEP_COLLS:-all_reduce all_gather reduce_scatter broadcast alltoall sendrecv}; do
		# shellcheck disable=SC2086 # extra flags
		timeout "$t" "$p" --np 2 --mem cuda --collective "$c" -d half -b 1K -e 1G -f 4 --graph 20 \
			"${peer_args[@]}" ${WEFT_SWEEP_ARGS:-} || r=1
	done
	return $r
}

# The record of docs/perf: every collective against NCCL, medians of 5 runs
# alternating with NCCL (--repeat 5), graphs of 20 calls, half, out of place and
# in place, checked, 1K-64M; then 256M-1G with 20 calls a measurement (-n 5
# --graph 4: 400 calls of 1 GiB a measurement would take minutes) and no check.
# WEFT_RECORD_COLLS picks the collectives.
do_record() {
	local p="$bdir/bin/weft-perf" t=${WEFT_PERF_STAGE_TIMEOUT:-300} c r=0
	nccl_peer
	nvidia-smi -L || true
	for c in ${WEFT_RECORD_COLLS:-all_reduce all_gather reduce_scatter broadcast alltoall sendrecv}; do
		timeout "$t" "$p" --np 2 --mem cuda --collective "$c" -d half -b 1K -e 64M -f 4 --graph 20 --repeat 5 \
			"${peer_args[@]}" || r=1
		timeout "$t" "$p" --np 2 --mem cuda --collective "$c" -d half -b 256M -e 1G -f 4 -n 5 --graph 4 \
			--repeat 5 -c 0 "${peer_args[@]}" || r=1
	done
	return $r
}

# The copy-engine path's open questions (docs/perf/2026-11-30-h200x2-ll-and-copy-engine.md):
# allreduce-ce at 1 GiB without NCCL in the process, with and without a graph
# (timing only: -c 0), and the fixed cost of copy-engine calls inside graphs
# (allgather 16M-256M).
do_ce_diag() {
	local p="$bdir/bin/weft-perf" t=${WEFT_PERF_STAGE_TIMEOUT:-120} r=0
	export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	for g in "" "--graph 20"; do
		# shellcheck disable=SC2086 # $g is one flag and its value, or nothing
		WEFT_ALGO_GPU_CE_ALLREDUCE_MIN=256M timeout "$t" "$p" --np 2 --mem cuda -d half -b 256M -e 1G -f 4 -c 0 \
			-w 2 -n 5 $g || r=1
		# shellcheck disable=SC2086
		WEFT_ALGO_GPU_CE_ALLGATHER_MIN=16M timeout "$t" "$p" --np 2 --mem cuda --collective all_gather -d half \
			-b 16M -e 256M -f 4 $g || r=1
	done
	return $r
}

# The NCCL API on device buffers, every collective the driver knows, values
# checked: one process per GPU, two ranks in one process through groups, and
# graph-captured calls replayed.
do_nccl() {
	local d="$bdir/bin/weft-nccl-driver" t=${WEFT_NCCL_STAGE_TIMEOUT:-60}
	export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	timeout "$t" "$d" -o all -b 4 -e 64M -f 16 -n 5 -w 2 --mem cuda --np 2 &&
		timeout "$t" "$d" -o all -b 4 -e 4M -f 16 -n 5 -w 2 --mem cuda --init-all 2 &&
		timeout "$t" "$d" -o all -b 4 -e 4M -f 16 -n 20 -w 2 --mem cuda --graph 10 --np 2 || return
	# One process per GPU under Open MPI, pinned to loopback and shared memory.
	if command -v mpirun >/dev/null; then
		local idf=/tmp/weft-nccl-id.$$
		rm -f "$idf"
		timeout "$t" mpirun --allow-run-as-root --mca oob_tcp_if_include lo --mca btl self,vader -np 2 \
			-x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x WEFT_CORE_BOOTSTRAP_ADDR -x WEFT_OFI_ADDR \
			"$d" -o all -b 4 -e 64M -f 16 -n 5 -w 2 --mem cuda --id-file "$idf"
		local r=$?
		rm -f "$idf"
		return $r
	fi
	echo "nccl: no mpirun on this machine: the launcher case was not run"
}

# Windows and ncclMemAlloc (issue 25 item 3): the GPU test, then the 1 MiB
# allreduce launched one call at a time (no graph), 2 ranks, every variant in
# each of 5 rounds so that they alternate, values checked: the default choice
# (allreduce-rsag below direct_allreduce_min), then allreduce-direct
# (direct_allreduce_min=1M) on cudaMalloc buffers and on ncclMemAlloc ones
# (a host exchange of buffer addresses per call), and in windows of either
# (none). The medians per variant close the log.
do_win() {
	local d="$bdir/bin/weft-nccl-driver" t=${WEFT_NCCL_STAGE_TIMEOUT:-60} r=0 i v line
	local variants=(default direct direct-nccl-mem direct-window direct-nccl-mem-window)
	local -A us=()
	export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	# shellcheck disable=SC2086 # extra ctest arguments
	WEFT_REQUIRE_GPU=1 ctest --test-dir "$bdir" -R 'test_nccl_win_gpu' --output-on-failure --timeout 300 \
		${WEFT_GPU_CTEST_ARGS:-} || r=1
	for i in 1 2 3 4 5; do
		for v in "${variants[@]}"; do
			local min=2M args=()
			[[ $v == direct* ]] && min=1M
			[[ $v == *nccl-mem* ]] && args+=(--nccl-mem)
			[[ $v == *window ]] && args+=(--window)
			line=$(WEFT_ALGO_GPU_DIRECT_ALLREDUCE_MIN=$min timeout "$t" "$d" -o allreduce -b 1M -e 1M -n 200 \
				-w 20 --mem cuda --np 2 "${args[@]}" | awk '$1 == 1048576 { print $3, $6 }')
			echo "win: round $i, $v: ${line:-no result} (us, #wrong)"
			if [[ -z $line || ${line#* } != 0 ]]; then
				r=1
				continue
			fi
			us[$v]+="${line% *} "
		done
	done
	echo "win: 1 MiB allreduce, int32, 2 ranks, no graph: medians of 5 runs (us)"
	for v in "${variants[@]}"; do
		# shellcheck disable=SC2086 # one value a word
		printf '  %-24s %s\n' "$v" "$(printf '%s\n' ${us[$v]:-} | sort -g |
			awk '{ a[NR] = $1 } END { print NR ? a[int((NR + 1) / 2)] : "none" }')"
	done
	return $r
}

# PyTorch unchanged on weft: torchrun, libweft_nccl preloaded, every result
# checked against a reference computed in the script (which also proves weft
# answered); then again with non-blocking communicators, a shorter set. Both
# ranks share the first GPU unless WEFT_TORCH_GPUS says more (1 rank a GPU: 2).
do_torch() {
	local r=0 nb port=${WEFT_TORCH_PORT:-29531}
	for nb in 0 1; do
		echo "=== torch, TORCH_NCCL_USE_COMM_NONBLOCKING=$nb"
		WEFT_TORCH_GPUS=${WEFT_TORCH_GPUS:-1} TORCH_NCCL_USE_COMM_NONBLOCKING=$nb WEFT_NCCL_LOG=info \
			LD_PRELOAD="$bdir/lib/libweft_nccl.so.2" \
			timeout "${WEFT_TORCH_STAGE_TIMEOUT:-180}" python3 -m torch.distributed.run --nproc-per-node 2 \
			--master-addr 127.0.0.1 --master-port $((port + nb)) "$src/tests/torch/weft_torch_check.py" || r=1
	done
	return $r
}

# The package's own backend (python/weft/torch_backend.py) on this machine's
# python3 and torch: PYTHONPATH and WEFT_LIB instead of an install, since
# nothing can be downloaded here. Builds only what it loads.
do_pgtorch() {
	if ((!carried)); then
		WEFT_GPU_TARGETS="weft weft-plugin-shm weft-plugin-algo-host weft-plugin-nvlink weft-plugin-algo-gpu" \
			do_build || return 1
	fi
	PYTHONPATH="$src/python${PYTHONPATH:+:$PYTHONPATH}" WEFT_LIB="$bdir/lib/libweft.so" WEFT_REQUIRE_GPU=1 \
		timeout "${WEFT_TORCH_STAGE_TIMEOUT:-300}" python3 -m torch.distributed.run --nproc-per-node 2 \
		--master-addr 127.0.0.1 --master-port "${WEFT_PGTORCH_PORT:-29551}" "$src/tests/torch/weft_pg_check.py"
}

# The vendor's tool on the GPU plugins; WEFT_REQUIRE_GPU makes a skipped
# CUDA check a failure here.
do_plugin_check() {
	local r=0 t="$bdir/bin/weft-plugin-check"
	WEFT_REQUIRE_GPU=1 "$t" --np 2 "$bdir/lib/weft/libweft-nvlink.so" || r=1
	WEFT_REQUIRE_GPU=1 "$t" --np 2 "$bdir/lib/weft/libweft-algo-gpu.so" || r=1
	# The copy-engine algorithms start at 256 MiB or more, past the edges the
	# checker calls at: checked again from 1 MiB (from 16 MiB, dtypes-ops ran
	# past the checker's 100 s a check).
	local k kinds=()
	for k in declares dtypes-ops sizes groups abort peer-killed device mismatch; do kinds+=(--check "*-ce/$k"); done
	WEFT_REQUIRE_GPU=1 WEFT_ALGO_GPU_CE_ALLREDUCE_MIN=1M WEFT_ALGO_GPU_CE_REDUCE_SCATTER_MIN=1M \
		WEFT_ALGO_GPU_CE_ALLGATHER_MIN=1M WEFT_ALGO_GPU_CE_BROADCAST_MIN=1M WEFT_ALGO_GPU_CE_ALLTOALL_MIN=1M \
		"$t" --np 2 "${kinds[@]}" "$bdir/lib/weft/libweft-algo-gpu.so" || r=1
	return $r
}

do_checkcost() {
	# Issue 30's cost of the call check: allreduce at 8 B and 1 KiB over shm on
	# host buffers, 2 and 8 ranks, RUNS rounds alternating [core] check_calls
	# on and off; medians of the per-call time, out of place and in place.
	local p="$bdir/bin/weft-perf" n on r=0 i t=${WEFT_CHECKCOST_TIMEOUT:-60}
	for n in ${WEFT_CHECKCOST_NPS:-2 8}; do
		for ((i = 0; i < ${WEFT_CHECKCOST_RUNS:-5}; i++)); do
			for on in 1 0; do
				WEFT_CORE_CHECK_CALLS=$on timeout "$t" "$p" --np "$n" --mem host --collective all_reduce \
					-b 8 -e 1K -f 128 -w 5000 -n 100000 >"$logs/checkcost-$n-$on-$i.log" 2>&1 || r=1
			done
		done
	done
	python3 - "$logs" <<'PY' || r=1
import glob, statistics, sys
rows = {}
for f in glob.glob(sys.argv[1] + "/checkcost-*.log"):
    n, on = f.rsplit("/", 1)[1].split("-")[1:3]
    for line in open(f):
        w = line.split()
        if len(w) >= 13 and w[0].isdigit():
            rows.setdefault((int(n), int(w[0]), on), []).append((float(w[5]), float(w[9])))
print("ranks size  check-on oop/ip (us)   check-off oop/ip   on-off oop/ip (ns)  runs")
for (n, b, on) in sorted(rows):
    if on != "1" or (n, b, "0") not in rows:
        continue
    a, z = rows[(n, b, "1")], rows[(n, b, "0")]
    m = [statistics.median(x[k] for x in a) for k in (0, 1)]
    o = [statistics.median(x[k] for x in z) for k in (0, 1)]
    print(f"{n:5} {b:5}  {m[0]:.2f}/{m[1]:.2f}  {o[0]:.2f}/{o[1]:.2f}  {1000*(m[0]-o[0]):+.0f}/{1000*(m[1]-o[1]):+.0f}  {len(a)}")
    print("   raw on: " + " ".join(f"{x[0]:.2f}/{x[1]:.2f}" for x in a))
    print("   raw off: " + " ".join(f"{x[0]:.2f}/{x[1]:.2f}" for x in z))
PY
	return $r
}

do_pycost() {
	# Issue 33 item 5: the Python package's cost per call (python/bench/percall.py,
	# numpy, 2 ranks over shm) beside weft-perf's 4-byte allreduce on the same
	# ranks and transport, RUNS rounds alternating; then a 4-byte all_reduce through
	# the torch backend "weft" (CPU and CUDA tensors) and through ProcessGroupNCCL
	# with libweft_nccl.so preloaded.
	local r=0 i t=${WEFT_PYCOST_TIMEOUT:-120} port=${WEFT_PYCOST_PORT:-29571}
	local py=(env PYTHONPATH="$src/python${PYTHONPATH:+:$PYTHONPATH}" WEFT_LIB="$bdir/lib/libweft.so")
	for ((i = 0; i < ${WEFT_PYCOST_RUNS:-5}; i++)); do
		"${py[@]}" timeout "$t" python3 "$src/python/bench/percall.py" || r=1
		WEFT_CORE_PLUGINS=shm,algo-host timeout "$t" "$bdir/bin/weft-perf" --np 2 --mem host \
			--collective all_reduce -b 4 -e 4 -w 2000 -n 20000 | grep -E '^ +4 ' || r=1
	done
	"${py[@]}" timeout "$t" python3 -m torch.distributed.run --nproc-per-node 2 --master-addr 127.0.0.1 \
		--master-port "$port" "$src/tests/torch/weft_percall.py" weft cpu cuda || r=1
	LD_PRELOAD="$bdir/lib/libweft_nccl.so.2" timeout "$t" python3 -m torch.distributed.run --nproc-per-node 2 \
		--master-addr 127.0.0.1 --master-port $((port + 1)) "$src/tests/torch/weft_percall.py" nccl cuda || r=1
	return $r
}

# algo-plan on device buffers: the GPU tests; weft-plan-gpu-bench (a
# one-rank plan of local operations against a native kernel doing the same
# work, 1K..1G, then a breakdown of the plan's call at 1K, 32K and 1M:
# nodes, kernel variants, per-phase stamps); then each of three plans against the native kernel of
# algo-gpu that runs the same algorithm (one-shot LL, one-shot,
# reduce-scatter + allgather), 2 ranks sharing GPU WEFT_PLAN_GPU (default 0),
# each put first by a `prefer` rule (the plans are out of place: weft-perf's
# in-place column goes to other algorithms), every result checked by
# weft-perf. Pairs are plan:algo-gpu algorithm:largest size.
do_plan() {
	local r=0 p="$bdir/bin/weft-perf" t=${WEFT_PERF_STAGE_TIMEOUT:-300} pair plan native max a
	if ((!carried)); then
		cmake --build "$bdir" -j "$jobs" --target weft-plugin-algo-plan weft-plugin-algo-gpu weft-plugin-nvlink \
			weft-plugin-shm test_plan_gpu test_plan_gpu_geom weft-plan-gpu-bench weft-perf weft-info || return 1
	fi
	# shellcheck disable=SC2086 # extra ctest arguments
	WEFT_REQUIRE_GPU=1 ctest --test-dir "$bdir" -R 'test_plan_gpu' --output-on-failure --timeout 900 \
		${WEFT_GPU_CTEST_ARGS:-} || r=1
	CUDA_VISIBLE_DEVICES=${WEFT_PLAN_GPU:-0} WEFT_REQUIRE_GPU=1 timeout "$t" "$bdir/bin/weft-plan-gpu-bench" \
		"${WEFT_PLAN_BENCH_BYTES:-1073741824}" || r=1
	for pair in allreduce_oneshot_2r_ll_mem:allreduce-ll:64K allreduce_oneshot_2r_simple_mem:allreduce-oneshot:16M \
		allreduce_ring_2r_simple_mem:allreduce-rsag:64M; do
		IFS=: read -r plan native max <<<"$pair"
		for a in "algo-plan/$plan" "algo-gpu/$native"; do
			printf '[algo-plan]\nplans = %s\n[algorithm]\nprefer %s when coll=allreduce and size=1K..\n' \
				"$src/plugins/algo-plan/plans" "$a" >"$logs/plan-bench.conf"
			echo "=== $a, 2 ranks on GPU ${WEFT_PLAN_GPU:-0}, 1K..$max"
			# weft-perf prints no algorithm: the choice per size, from the rules.
			WEFT_CONFIG="$logs/plan-bench.conf" "$bdir/bin/weft-info" --select --np 2 --mem cuda |
				sed -n '/^  allreduce:/,/^  [a-z]/p'
			CUDA_VISIBLE_DEVICES=${WEFT_PLAN_GPU:-0} WEFT_CONFIG="$logs/plan-bench.conf" timeout "$t" "$p" --np 2 \
				--mem cuda --collective all_reduce -b 1K -e "$max" -f 4 || r=1
		done
	done
	return $r
}

for s in "${stages[@]}"; do
	case $s in
	build)
		if ((carried)); then
			echo "gpu-check: build stage skipped: the build is carried (tools/gpu-carry.sh)"
			continue
		fi
		stage build do_build || break
		;;
	test) stage test do_test ;;
	hier) stage hier do_hier ;;
	xhost) stage xhost do_xhost ;;
	xconf) stage xconf do_xconf ;;
	xtorch) stage xtorch do_xtorch ;;
	bench) stage bench do_bench ;;
	algo-bench) stage algo-bench do_algo_bench ;;
	perf) stage perf do_perf ;;
	sweep) stage sweep do_sweep ;;
	record) stage record do_record ;;
	ce-diag) stage ce-diag do_ce_diag ;;
	nccl) stage nccl do_nccl ;;
	torch) stage torch do_torch ;;
	pgtorch) stage pgtorch do_pgtorch ;;
	plugin-check) stage plugin-check do_plugin_check ;;
	plan) stage plan do_plan ;;
	win) stage win do_win ;;
	checkcost) stage checkcost do_checkcost ;;
	pycost) stage pycost do_pycost ;;
	*) echo "gpu-check: unknown stage $s" >&2; exit 2 ;;
	esac
done
echo "=== gpu-check summary"
printf '%s\n' "${summary[@]}" | tee "$logs/summary.txt"
exit $rc
