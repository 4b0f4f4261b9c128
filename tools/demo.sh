#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The README's main-job command: installs what is missing, builds weft (Release)
# and runs the main job on CPU through the default transport, printing its table.
#   WEFT_BUILD_DIR   build folder (default: build/ in the source tree)
#   WEFT_CMAKE_ARGS  extra CMake arguments, split on white space
# Extra arguments to this script are passed on to weft-perf.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${WEFT_BUILD_DIR:-$src/build}
read -r -a cmake_args <<<"${WEFT_CMAKE_ARGS:-}"
jobs=$(nproc 2>/dev/null || echo 2)

nvcc=/usr/local/cuda/bin/nvcc
if [[ -x $nvcc && -z ${CUDACXX:-} && ${WEFT_CMAKE_ARGS:-} != *CMAKE_CUDA_COMPILER* ]]; then
	cmake_args+=("-DCMAKE_CUDA_COMPILER=$nvcc")
fi

# Wall-clock seconds with a fraction, and the seconds elapsed since such a time.
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

stage() {
	local name=$1 t0 rc=0
	shift
	t0=$(now)
	echo "=== stage $name: $*"
	"$@" || rc=$?
	echo "stage $name: $(since "$t0") s$( ((rc == 0)) || echo " (FAILED, exit $rc)")"
	return "$rc"
}

stage deps "$src/tools/deps.sh"
# A demo must not stop on a compiler warning, even in a build folder that CI
# configured with -DWEFT_WERROR=ON (the cache would keep it); WEFT_CMAKE_ARGS
# come last and can turn it back on.
stage configure cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DWEFT_WERROR=OFF "${cmake_args[@]}"
stage build cmake --build "$build" -j "$jobs"

perf=$build/bin/weft-perf
if [[ ! -x $perf ]]; then
	echo "demo: $perf was not built (tools/weft-perf/ missing from this tree?)" >&2
	exit 1
fi

# The main job is the all-reduce sweep: 4 ranks on this host, 1 KiB to 64 MiB,
# each size 4x the last, through the default transport on host memory. Until
# weft-perf has collectives (--collective), fall back to the primitive it has:
# one-sided put between 2 ranks over the same sizes.
main_job=(--np 4 --collective all_reduce -b 1K -e 64M -f 4)
fallback_job=(--np 2 --op put -b 1K -e 64M -f 4)
if "$perf" --help 2>&1 | grep -q -e '--collective'; then
	job=("${main_job[@]}")
else
	echo "demo: this weft-perf has no --collective yet; running the put benchmark instead"
	job=("${fallback_job[@]}")
fi
stage run "$perf" "${job[@]}" "$@"
