#!/usr/bin/env bash
# GPU check of the algo-gpu pack: build the pack, nvlink and its tests, run the
# gpu-labelled algo-gpu tests with a GPU required, then the benchmark (with
# NCCL's column when PyTorch's libnccl.so.2 is found). Mirrors
# tools/gpu-check.sh (Check from carried .debs, loopback only, NVLink
# multicast off). Stages: build test bench (default: all). Logs go to $OUT
# when set (the device machine), else to build-gpu-algo/logs.
# Usage: tools/gpu-check-algo.sh [build] [test] [bench] [rings] [multi]
# (test: 2 ranks, every size class; rings: the same with only the pipelined
# algorithms; multi: 3 and 4 ranks, several per GPU)
set -uo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$src"
stages=("$@")
((${#stages[@]})) || stages=(build test bench rings multi)
bdir=${WEFT_GPU_BUILD:-$src/build-gpu-algo}
logs=${OUT:-$bdir/logs}
mkdir -p "$logs"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1 WEFT_OFI_ADDR=127.0.0.1 WEFT_OFI_IFACE=lo
export NCCL_SOCKET_IFNAME=lo NCCL_COMM_ID_ADDR=127.0.0.1
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
jobs=$(nproc 2>/dev/null || echo 4)
((jobs > 16)) && jobs=16

if ! pkg-config --exists check 2>/dev/null && [[ -d .deb ]] && ls .deb/*.deb >/dev/null 2>&1; then
	priv=/tmp/weft-deps
	rm -rf "$priv" && mkdir -p "$priv"
	for f in .deb/*.deb; do dpkg -x "$f" "$priv"; done
	for pc in "$priv"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc; do
		sed -i "s|^prefix=.*|prefix=$priv/usr|; s|^libdir=.*|libdir=$priv/usr/lib/x86_64-linux-gnu|; s|^includedir=.*|includedir=$priv/usr/include|" "$pc"
	done
	export LD_LIBRARY_PATH=$priv/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	command -v pkg-config >/dev/null || export PATH=$priv/usr/bin:$PATH
	export PKG_CONFIG_PATH=$priv/usr/lib/x86_64-linux-gnu/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
	export CMAKE_PREFIX_PATH=$priv/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
	echo "gpu-check-algo: Check from carried .debs in $priv"
fi

rc=0
summary=()
stage() {
	local name=$1
	shift
	local t0=$SECONDS
	echo "=== stage $name"
	"$@" 2>&1 | tee "$logs/algo-$name.log"
	local r=${PIPESTATUS[0]}
	summary+=("$(printf '%-6s %-4s %4ds' "$name" "$([[ $r == 0 ]] && echo ok || echo FAIL)" $((SECONDS - t0)))")
	((r == 0)) || rc=1
	return "$r"
}

do_build() {
	cmake -S "$src" -B "$bdir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_REQUIRE_PLUGINS=nvlink,algo-gpu \
		-DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null &&
		cmake --build "$bdir" -j "$jobs" --target weft-plugin-nvlink weft-plugin-algo-gpu test_algo_gpu \
			test_algo_gpu_sched weft-algo-gpu-bench &&
		tools/check-no-multicast.sh "$bdir"
}

# Each forked group of ranks is bounded by WAG_TEST_TIMEOUT seconds, so a hung
# kernel fails its case instead of eating the lease.
run_tests() {
	WEFT_REQUIRE_GPU=1 WAG_TEST_TIMEOUT=${WAG_TEST_TIMEOUT:-120} ctest --test-dir "$bdir" -R "$1" --output-on-failure
}
do_test() {
	nvidia-smi -L || true
	run_tests '^test_algo_gpu(_sched|_graph)?$'
}
do_rings() { run_tests 'test_algo_gpu_rings'; }
do_multi() { run_tests 'test_algo_gpu_multi'; }

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

do_bench() {
	local lib
	lib=$(find_nccl)
	echo "NCCL library: ${lib:-not found}"
	WAG_NCCL_LIB=$lib timeout "${WEFT_ALGO_BENCH_TIMEOUT:-240}" "$bdir/bin/weft-algo-gpu-bench" \
		"${WEFT_ALGO_BENCH_BYTES:-1073741824}"
}

for s in "${stages[@]}"; do
	case $s in
	build) stage build do_build || break ;;
	test) stage test do_test ;;
	bench) stage bench do_bench ;;
	rings) stage rings do_rings ;;
	multi) stage multi do_multi ;;
	*) echo "gpu-check-algo: unknown stage $s" >&2; exit 2 ;;
	esac
done
echo "=== gpu-check-algo summary"
printf '%s\n' "${summary[@]}" | tee "$logs/algo-summary.txt"
exit $rc
