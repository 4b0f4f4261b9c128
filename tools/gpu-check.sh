#!/usr/bin/env bash
# GPU check: build with the nvlink plugin required, run the gpu-labelled tests
# with a GPU required, then the nvlink benchmark. Stages: build test bench
# (default: all three), each timed. Logs go to $OUT when set (the device
# machine), else to build-gpu/logs. NVLink multicast stays off throughout.
# Usage: tools/gpu-check.sh [build] [test] [bench]
set -uo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$src" || exit
stages=("$@")
((${#stages[@]})) || stages=(build test bench)
bdir=${WEFT_GPU_BUILD:-$src/build-gpu}
logs=${OUT:-$bdir/logs}
mkdir -p "$logs"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1 WEFT_OFI_ADDR=127.0.0.1 WEFT_OFI_IFACE=lo
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
jobs=$(nproc 2>/dev/null || echo 4)
((jobs > 16)) && jobs=16

# Check (and pkg-config) from Debian .debs carried in .deb/ when the host has none.
if ! pkg-config --exists check 2>/dev/null && [[ -d .deb ]] && ls .deb/*.deb >/dev/null 2>&1; then
	priv=/tmp/weft-deps
	rm -rf "$priv" && mkdir -p "$priv"
	for f in .deb/*.deb; do dpkg -x "$f" "$priv"; done
	for pc in "$priv"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc; do
		sed -i "s|^prefix=.*|prefix=$priv/usr|; s|^libdir=.*|libdir=$priv/usr/lib/x86_64-linux-gnu|; s|^includedir=.*|includedir=$priv/usr/include|" "$pc"
	done
	# libsubunit.so.0 is needed at run time too, so the library path is always set.
	export LD_LIBRARY_PATH=$priv/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	command -v pkg-config >/dev/null || export PATH=$priv/usr/bin:$PATH
	export PKG_CONFIG_PATH=$priv/usr/lib/x86_64-linux-gnu/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
	export CMAKE_PREFIX_PATH=$priv/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
	echo "gpu-check: Check from carried .debs in $priv ($(pkg-config --modversion check 2>&1))"
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

do_build() {
	cmake -S "$src" -B "$bdir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_REQUIRE_PLUGINS=nvlink,algo-gpu \
		-DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES=90 &&
		if [[ ${WEFT_GPU_FULL_BUILD:-0} == 1 ]]; then
			cmake --build "$bdir" -j "$jobs"
		else
			# The GPU targets alone: the rest of the tree is CI's business.
			# shellcheck disable=SC2086 # a list of target names
			cmake --build "$bdir" -j "$jobs" --target ${WEFT_GPU_TARGETS:-weft-plugin-nvlink weft-plugin-algo-gpu \
				test_nvlink_gpu test_devchan_gpu test_nvlink_nodev test_algo_gpu weft-gpu-bench weft-info}
		fi &&
		tools/check-no-multicast.sh "$bdir"
}

do_test() {
	nvidia-smi -L || true
	nvidia-smi topo -m || true
	# shellcheck disable=SC2086 # extra ctest arguments, e.g. -R or -E filters
	WEFT_REQUIRE_GPU=1 ctest --test-dir "$bdir" -L gpu --output-on-failure --timeout 900 ${WEFT_GPU_CTEST_ARGS:-} &&
		ctest --test-dir "$bdir" -R nvlink_nodev --output-on-failure
}

do_bench() {
	"$bdir/bin/weft-gpu-bench" "${WEFT_GPU_BENCH_BYTES:-1073741824}"
}

for s in "${stages[@]}"; do
	case $s in
	build) stage build do_build || break ;;
	test) stage test do_test ;;
	bench) stage bench do_bench ;;
	*) echo "gpu-check: unknown stage $s" >&2; exit 2 ;;
	esac
done
echo "=== gpu-check summary"
printf '%s\n' "${summary[@]}" | tee "$logs/summary.txt"
exit $rc
