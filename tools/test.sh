#!/usr/bin/env bash
# Builds weft and runs its test suite: the README's test command.
#   WEFT_BUILD_DIR   build folder (default: build/ in the source tree)
#   WEFT_CMAKE_ARGS  extra CMake arguments, split on white space
#   WEFT_CTEST_ARGS  extra ctest arguments (e.g. "-L unit" or "-R registry")
# Prints "stage <name>: <seconds> s" for each stage; exits non-zero on any failure.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${WEFT_BUILD_DIR:-$src/build}
read -r -a cmake_args <<<"${WEFT_CMAKE_ARGS:-}"
read -r -a ctest_args <<<"${WEFT_CTEST_ARGS:-}"
jobs=$(nproc 2>/dev/null || echo 2)

# nvcc is installed off PATH (/usr/local/cuda/bin); hand it to CMake unless the
# caller chose a CUDA compiler already. Without one the GPU plugins are skipped.
nvcc=/usr/local/cuda/bin/nvcc
if [[ -x $nvcc && -z ${CUDACXX:-} && ${WEFT_CMAKE_ARGS:-} != *CMAKE_CUDA_COMPILER* ]]; then
	cmake_args+=("-DCMAKE_CUDA_COMPILER=$nvcc")
fi

# Wall-clock seconds with a fraction, and the seconds elapsed since such a time.
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# stage <name> <command...>: runs the command and reports how long it took; the
# script stops at the first stage that fails (set -e), after reporting it.
stage() {
	local name=$1 t0 rc=0
	shift
	t0=$(now)
	echo "=== stage $name: $*"
	"$@" || rc=$?
	echo "stage $name: $(since "$t0") s$( ((rc == 0)) || echo " (FAILED, exit $rc)")"
	return "$rc"
}

t_start=$(now)
report_total() { echo "test.sh: total $(since "$t_start") s"; }
trap report_total EXIT

stage deps "$src/tools/deps.sh"
stage configure cmake -S "$src" -B "$build" "${cmake_args[@]}"
stage build cmake --build "$build" -j "$jobs"
stage test ctest --test-dir "$build" --output-on-failure -j2 "${ctest_args[@]}"
