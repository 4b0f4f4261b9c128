#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Compares weft-perf with Open MPI on this host: all_reduce and all_gather on 2
# and 4 ranks, 1 KiB to 64 MiB, weft-perf (--np N) and tools/mpi_bench.c under
# mpirun (loopback and shared memory only) run alternately RUNS times each; the
# median out-of-place time per size goes into one table.
#   usage: tools/bench-vs-mpi.sh [OUTDIR]     (default /tmp/weft-bench-<date>)
#   WEFT_PERF  weft-perf binary (default: $WEFT_BUILD_DIR/bin/weft-perf, else build/bin/weft-perf)
#   RUNS       runs of each program per case (default 5, at least 5 for a figure worth keeping)
#   NPS        rank counts (default "2 4")
#   COLLS      collectives (default "all_reduce all_gather")
#   MINB MAXB FACTOR ITERS WARMUP   sweep (default 1K 64M 2 20 5)
#   DTYPE      element type for both (default float)
#   WEFT_PERF_OLD  a second weft-perf (an older build) run in the same rounds;
#              the table then also compares the two builds point by point;
#              WEFT_PERF_OLD_REV names its commit in env.txt (a binary's directory
#              may sit in another checkout, so git cannot be asked)
# Writes OUTDIR/table.md (also printed), OUTDIR/raw/*.log and OUTDIR/env.txt.
# Exits non-zero when a run fails or reports wrong data.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-/tmp/weft-bench-$(date +%Y%m%d-%H%M%S)}
perf=${WEFT_PERF:-${WEFT_BUILD_DIR:-$src/build}/bin/weft-perf}
runs=${RUNS:-5}
nps=${NPS:-2 4}
colls=${COLLS:-all_reduce all_gather}
minb=${MINB:-1K}
maxb=${MAXB:-64M}
factor=${FACTOR:-2}
iters=${ITERS:-20}
warmup=${WARMUP:-5}
dtype=${DTYPE:-float}

die() {
	echo "bench-vs-mpi: $*" >&2
	exit 1
}

[[ -x $perf ]] || die "weft-perf not found at $perf (build it, or set WEFT_PERF)"
old=${WEFT_PERF_OLD:-}
[[ -z $old || -x $old ]] || die "WEFT_PERF_OLD is not an executable: $old"
command -v mpicc >/dev/null || die "mpicc not found (apt-get install libopenmpi-dev openmpi-bin)"
command -v mpirun >/dev/null || die "mpirun not found (apt-get install openmpi-bin)"
((runs >= 1)) || die "RUNS must be at least 1"

# Both sides stay on this host's loopback and shared memory: MPI through its
# flags below, weft's bootstrap (and the ofi addresses that follow it) here.
export WEFT_CORE_BOOTSTRAP_ADDR=${WEFT_CORE_BOOTSTRAP_ADDR:-127.0.0.1}

mkdir -p "$out/raw"
mpi_bench=$out/mpi_bench
mpicc -O2 -o "$mpi_bench" "$src/tools/mpi_bench.c" || die "mpicc failed on tools/mpi_bench.c"

{
	echo "date: $(date -Is)"
	echo "host: $(hostname) ($(nproc) cores, $(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo))"
	echo "cpu: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
	echo "kernel: $(uname -r)"
	echo "weft-perf: $perf"
	[[ -z $old ]] || echo "old weft-perf: $old (commit ${WEFT_PERF_OLD_REV:-not given})"
	echo "weft git: $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$src" diff --quiet 2>/dev/null || echo ' (modified tree)')"
	echo "mpi: $(mpirun --version 2>&1 | head -1)"
	echo "weft environment: $(env | grep -E '^(WEFT_|FI_)' | sort | tr '\n' ' ')"
	echo "runs: $runs, ranks: $nps, collectives: $colls, sizes: $minb..$maxb x$factor, iters $iters, warmup $warmup, type $dtype"
	echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/env.txt"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

sweep=(-b "$minb" -e "$maxb" -f "$factor" -n "$iters" -w "$warmup" -d "$dtype")
mpirun_cmd=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader --mca oob_tcp_if_include lo)

# run_one <log> <command...>: runs a sweep, keeps its output, fails on a non-zero
# exit or a non-zero #wrong anywhere.
run_one() {
	local log=$1
	shift
	echo "+ $*" >"$log"
	if ! "$@" >>"$log" 2>&1; then
		echo "bench-vs-mpi: failed: $* (log: $log)" >&2
		tail -5 "$log" >&2
		return 1
	fi
	if awk '/^ *[0-9]/ && NF >= 13 && ($9 != 0 || $13 != 0) {bad = 1} END {exit !bad}' "$log"; then
		echo "bench-vs-mpi: wrong data reported in $log" >&2
		return 1
	fi
}

status=0
for np in $nps; do
	for coll in $colls; do
		for ((i = 1; i <= runs; i++)); do
			[[ -z $old ]] || run_one "$out/raw/old-$coll-np$np-run$i.log" "$old" --np "$np" \
				--collective "$coll" "${sweep[@]}" || status=1
			run_one "$out/raw/weft-$coll-np$np-run$i.log" "$perf" --np "$np" --collective "$coll" "${sweep[@]}" || status=1
			run_one "$out/raw/mpi-$coll-np$np-run$i.log" "${mpirun_cmd[@]}" -np "$np" "$mpi_bench" \
				--collective "$coll" "${sweep[@]}" || status=1
		done
	done
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
echo "load at end: $load_end" >>"$out/env.txt"

# median <tool> <coll> <np>: "size median_us runs min_us max_us" per size over the runs'
# out-of-place time column (6th field of nccl-tests' rows).
median() {
	cat "$out"/raw/"$1-$2-np$3"-run*.log 2>/dev/null | awk '/^ *[0-9]/ && NF >= 13 {print $1, $6}' |
		sort -k1,1n -k2,2g | awk '
		{ v[$1] = v[$1] " " $2; n[$1]++ }
		END {
			for (s in n) {
				c = split(substr(v[s], 2), a, " ")
				m = (c % 2) ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2
				print s, m, c, a[1], a[c]
			}
		}' | sort -k1,1n
}

{
	echo "# weft-perf vs Open MPI, $(date +%Y-%m-%d), $(hostname)"
	echo
	echo "Median of $runs runs each (run alternately), out-of-place time per call in us;"
	echo "ratio = weft / MPI (below 1: weft is faster). Type $dtype, $iters iterations after $warmup warm-up."
	echo "min: the fastest of the runs (on a shared or virtual host the runs can differ by a state of"
	echo "the machine, not of the library; the minima compare the two in their best state)."
	echo "MPI: ${mpirun_cmd[*]} -np N mpi_bench. weft: weft-perf --np N."
	echo "Load average (1, 5, 15 min) at start: $load_start; at end: $load_end ($(nproc) CPUs)."
	for np in $nps; do
		for coll in $colls; do
			echo
			echo "## $coll, $np ranks"
			echo
			echo "| size (B) | weft us | MPI us | ratio | weft min | MPI min | ratio of min |"
			echo "|---:|---:|---:|---:|---:|---:|---:|"
			join -a1 -a2 -e - -o 0,1.2,2.2,1.4,2.4 <(median weft "$coll" "$np" | sort -k1,1) \
				<(median mpi "$coll" "$np" | sort -k1,1) | sort -k1,1n |
				awk '{ r = ($2 != "-" && $3 != "-" && $3 > 0) ? sprintf("%.2f", $2 / $3) : "-";
				       q = ($4 != "-" && $5 != "-" && $5 > 0) ? sprintf("%.2f", $4 / $5) : "-";
				       printf("| %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, r, $4, $5, q) }'
		done
	done
	if [[ -n $old ]]; then
		echo
		echo "# new build vs old build"
		echo
		echo "new: $perf; old: $old, run in the same rounds. ok: the medians are within 5%,"
		echo "or one build's median lies within the other's min..max over its $runs runs."
		for np in $nps; do
			for coll in $colls; do
				echo
				echo "## $coll, $np ranks"
				echo
				echo "| size (B) | old us | new us | new/old | old min..max | new min..max | ok |"
				echo "|---:|---:|---:|---:|---:|---:|:---:|"
				join -a1 -a2 -e - -o 0,1.2,2.2,1.4,1.5,2.4,2.5 <(median old "$coll" "$np" | sort -k1,1) \
					<(median weft "$coll" "$np" | sort -k1,1) | sort -k1,1n |
					awk '{ if ($2 == "-" || $3 == "-" || $2 <= 0) { r = "-"; ok = "no" } else {
					         q = $3 / $2; r = sprintf("%.3f", q)
					         ok = (q >= 0.95 && q <= 1.05) || ($3 >= $4 && $3 <= $5) || ($2 >= $6 && $2 <= $7) ? "yes" : "no" }
					       printf("| %s | %s | %s | %s | %s..%s | %s..%s | %s |\n", $1, $2, $3, r, $4, $5, $6, $7, ok) }'
			done
		done
	fi
	echo
	echo "Raw logs: $out/raw/; environment: $out/env.txt"
} >"$out/table.md"

cat "$out/table.md"
((status == 0)) || echo "bench-vs-mpi: some runs failed or reported wrong data (see above)" >&2
exit "$status"
