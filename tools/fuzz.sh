#!/usr/bin/env bash
# Builds weft's libFuzzer targets (fuzz/) with clang in build-fuzz/ and runs each
# for a bounded time, starting from its seed corpus in fuzz/corpus/<target>/.
#   FUZZ_SECONDS    seconds per target (default 25)
#   FUZZ_BUILD_DIR  build folder (default: build-fuzz/ in the source tree)
#   FUZZ_TARGETS    space-separated subset of targets (default: all built)
#   FUZZ_JOBS       make -j (default 2)
# Prints, per target, the inputs executed (libFuzzer's final stats) and fails
# when any target crashes, leaks or hits undefined behaviour; the crashing
# input is left in <build>/fuzz/artifacts/<target>/ and named in the output.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$src/build-fuzz}
secs=${FUZZ_SECONDS:-25}
jobs=${FUZZ_JOBS:-2}
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
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=1:print_stacktrace=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
# UCX's memory hooks patch malloc and mmap, which the sanitizers own here.
export UCX_MEM_EVENTS=no UCX_MEM_MALLOC_HOOKS=no

failed=()
summary=()
for t in "${targets[@]}"; do
	seeds=$src/fuzz/corpus/${t#fuzz_}
	work=$build/fuzz/corpus-work/$t
	arts=$build/fuzz/artifacts/$t/
	mkdir -p "$work" "$arts"
	log=$build/fuzz/$t.log
	echo "=== $t: $secs s from $seeds"
	rc=0
	# The seeds stay as they are: new inputs go to the working copy (first dir).
	"$build/fuzz/$t" -max_total_time="$secs" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
		-artifact_prefix="$arts" "$work" "$seeds" >"$log" 2>&1 || rc=$?
	execs=$(awk '/stat::number_of_executed_units:/ {print $2}' "$log" | tail -n1)
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n1 | awk '{print $2}')
	if ((rc != 0)); then
		tail -n 60 "$log"
		crash=$(grep -o "Test unit written to [^ ]*" "$log" | tail -n1 | sed 's/Test unit written to //')
		summary+=("$t: FAILED (exit $rc) after ${execs:-?} inputs; input: ${crash:-none written}")
		failed+=("$t")
	else
		summary+=("$t: ${execs:-?} inputs executed in $secs s, coverage ${cov:-?} edges, no crash")
	fi
done

echo
echo "=== fuzz summary"
printf '%s\n' "${summary[@]}"
if ((${#failed[@]})); then
	echo "FAILED: ${failed[*]}"
	exit 1
fi
