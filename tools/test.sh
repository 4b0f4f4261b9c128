#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
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

# GCC 12's and clang 14's sanitizer runtimes take a dynamic TLS block that
# malloc placed 16 bytes into a page (libucs's, 36 bytes) for a pre-2.25 glibc
# header, and LeakSanitizer's tracer then scans a range made of the allocator's
# chunk header and crashes in ScanRangeForPointers: "Tracer caught signal 11".
# Dynamic TLS blocks stay reachable through glibc's own malloc'd DTV without
# the interceptor (docs/reliability.md, "LeakSanitizer's tracer").
case ":${ASAN_OPTIONS:-}:" in
*:intercept_tls_get_addr=*) ;;
*) export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}intercept_tls_get_addr=0" ;;
esac

t_start=$(now)
report_total() { echo "test.sh: total $(since "$t_start") s"; }
trap report_total EXIT

stage deps "$src/tools/deps.sh"
stage configure cmake -S "$src" -B "$build" "${cmake_args[@]}"
stage build cmake --build "$build" -j "$jobs"
stage test ctest --test-dir "$build" --output-on-failure -j2 "${ctest_args[@]}"
