#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds weft's libFuzzer targets (fuzz/) with clang in build-fuzz/ and runs each
# for a bounded time, starting from its seed corpus in fuzz/corpus/<target>/.
#   FUZZ_SECONDS    seconds per target (default 25)
#   FUZZ_BUILD_DIR  build folder (default: build-fuzz/ in the source tree)
#   FUZZ_TARGETS    space-separated subset of targets (default: all built)
#   FUZZ_JOBS       make -j (default 2)
#   FUZZ_PARALLEL   targets fuzzed at once, one core each (default 2: CI has 2 cores)
# Prints, per target, the inputs executed (libFuzzer's final stats) and fails
# when any target crashes, leaks or hits undefined behaviour; the crashing
# input is left in <build>/fuzz/artifacts/<target>/ and named in the output.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$src/build-fuzz}
secs=${FUZZ_SECONDS:-25}
jobs=${FUZZ_JOBS:-2}
parallel=${FUZZ_PARALLEL:-2}
cc=${FUZZ_CC:-$(command -v clang || command -v clang-14 || true)}
if [[ -z $cc ]]; then
	echo "fuzz.sh: clang not found (install clang and libclang-rt-14-dev)" >&2
	exit 1
fi

mkdir -p "$build"
cmake -S "$src" -B "$build" -DCMAKE_C_COMPILER="$cc" -DWEFT_FUZZ=ON -DWEFT_BUILD_TESTS=OFF \
	-DWEFT_SANITIZE=address,undefined -DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link \
	-DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build/configure.log" 2>&1 || {
	cat "$build/configure.log"
	exit 1
}
make -C "$build" -j"$jobs" weft-fuzzers

all=()
for f in "$build"/fuzz/fuzz_*; do
	[[ -x $f ]] && all+=("$(basename "$f")")
done
read -r -a targets <<<"${FUZZ_TARGETS:-${all[*]}}"

# Leaks fail a run too; UBSan stops at the first report (as in the ASan CI job).
# intercept_tls_get_addr=0: clang 14's runtime misreads dynamic TLS blocks as
# tools/test.sh says, which crashes LeakSanitizer's tracer.
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=1:print_stacktrace=1:intercept_tls_get_addr=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
# Third-party libraries only (see the file): UCX owns memory that LeakSanitizer
# cannot see it referencing.
export LSAN_OPTIONS="suppressions=$src/fuzz/lsan.supp:print_suppressions=0"
# UCX's memory hooks patch malloc and mmap, which the sanitizers own here.
export UCX_MEM_EVENTS=no UCX_MEM_MALLOC_HOOKS=no

# One target: its log in <build>/fuzz/<target>.log, one summary line in .result.
fuzz_one() {
	local t=$1
	local seeds=$src/fuzz/corpus/${t#fuzz_}
	local work=$build/fuzz/corpus-work/$t
	local arts=$build/fuzz/artifacts/$t/
	local log=$build/fuzz/$t.log
	mkdir -p "$work" "$arts"
	local rc=0
	# The seeds stay as they are: new inputs go to the working copy (first dir).
	"$build/fuzz/$t" -max_total_time="$secs" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
		-artifact_prefix="$arts" "$work" "$seeds" >"$log" 2>&1 || rc=$?
	local execs cov crash
	execs=$(awk '/stat::number_of_executed_units:/ {print $2}' "$log" | tail -n1)
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n1 | awk '{print $2}')
	if ((rc != 0)); then
		crash=$(grep -o "Test unit written to [^ ]*" "$log" | tail -n1 | sed 's/Test unit written to //')
		echo "$t: FAILED (exit $rc) after ${execs:-?} inputs; input: ${crash:-none written}" >"$log.result"
	else
		echo "$t: ${execs:-?} inputs executed in $secs s, coverage ${cov:-?} edges, no crash" >"$log.result"
	fi
	return $rc
}

# FUZZ_PARALLEL targets at a time, each on its own core, so that the stage
# takes about ceil(targets / FUZZ_PARALLEL) x FUZZ_SECONDS.
failed=()
pids=()
names=()
flush_one() {
	local rc=0
	wait "${pids[0]}" || rc=$?
	if ((rc != 0)); then
		tail -n 60 "$build/fuzz/${names[0]}.log"
		failed+=("${names[0]}")
	fi
	pids=("${pids[@]:1}")
	names=("${names[@]:1}")
}
start=$SECONDS
for t in "${targets[@]}"; do
	rm -f "$build/fuzz/$t.log.result"
	echo "=== $t: $secs s from $src/fuzz/corpus/${t#fuzz_}"
	fuzz_one "$t" &
	pids+=($!)
	names+=("$t")
	if ((${#pids[@]} >= parallel)); then
		flush_one
	fi
done
while ((${#pids[@]})); do
	flush_one
done

echo
echo "=== fuzz summary (${#targets[@]} targets, $parallel at a time, $((SECONDS - start)) s of fuzzing)"
for t in "${targets[@]}"; do
	cat "$build/fuzz/$t.log.result" 2>/dev/null || echo "$t: no result"
done
if ((${#failed[@]})); then
	echo "FAILED: ${failed[*]}"
	exit 1
fi
