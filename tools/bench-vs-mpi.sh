#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Compares weft-perf with Open MPI and PyTorch's gloo on this host: the six
# collectives (all_reduce all_gather reduce_scatter broadcast reduce
# alltoall), 1 KiB to 64 MiB by factors of 4, at each rank count of NPS.
# Each rank count is one stage: RUNS rounds, and in each round every
# collective runs under weft-perf (--np N), Open MPI with its single-copy
# path off and with CMA (tools/mpi_bench.c under mpirun, loopback and shared
# memory only) one after the other, then gloo (tools/bench-gloo.py, one
# torchrun launch for every collective and size, on CPU tensors), then the
# host's memory bandwidth with N ranks at once (mpi_bench --collective
# membw). Sizes above LARGE run fewer iterations. The table gives per point
# the median and interquartile range of each library's out-of-place time,
# marks a point "behind" when weft's median exceeds the best peer's by more
# than 5% and the two interquartile ranges do not overlap, and gives for
# such a point the floor (the copies and reductions the collective needs at
# the memory bandwidth measured in the same stage) and each library's
# distance from it.
#   usage: tools/bench-vs-mpi.sh [OUTDIR]     (default /tmp/weft-bench-<date>)
#   WEFT_PERF  weft-perf binary (default: $WEFT_BUILD_DIR/bin/weft-perf, else build/bin/weft-perf)
#   RUNS       rounds per stage (default 5, at least 5 for a figure worth keeping)
#   NPS        rank counts, one stage each (default "2 4 8 16"); run stages in
#              separate calls into one OUTDIR to keep each call short: the
#              table covers every stage found there, and stages.txt says
#              when each ran
#   COLLS      collectives (default: the six)
#   MINB MAXB FACTOR ITERS WARMUP   sweep (default 1K 64M 4 20 5)
#   LARGE ITERS_LARGE WARMUP_LARGE  sizes above LARGE run ITERS_LARGE
#              iterations after WARMUP_LARGE (default 4M 4 1)
#   MPI_MODES  Open MPI's single-copy settings to run (default "none cma";
#              "" for none); skipped, saying why, without mpicc and mpirun
#   GLOO       1 run gloo, 0 skip it (default 1; skipped, saying why, where
#              python3 cannot import torch); TORCHRUN (default torchrun, else
#              python3 -m torch.distributed.run)
#   WEFT_PERF_OLD  a second weft-perf (an older build) run in the same rounds;
#              the table then also compares the two builds point by point;
#              WEFT_PERF_OLD_REV names its commit in env.txt
#   TABLE_ONLY 1: run nothing, write the table from OUTDIR's raw logs
# Writes OUTDIR/table.md (also printed), OUTDIR/raw/*.log, OUTDIR/env.txt and
# OUTDIR/stages.txt. Exits non-zero when a run fails or reports wrong data.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-/tmp/weft-bench-$(date +%Y%m%d-%H%M%S)}
perf=${WEFT_PERF:-${WEFT_BUILD_DIR:-$src/build}/bin/weft-perf}
runs=${RUNS:-5}
nps=${NPS:-2 4 8 16}
colls=${COLLS:-all_reduce all_gather reduce_scatter broadcast reduce alltoall}
minb=${MINB:-1K}
maxb=${MAXB:-64M}
factor=${FACTOR:-4}
iters=${ITERS:-20}
warmup=${WARMUP:-5}
large=${LARGE:-4M}
iters_large=${ITERS_LARGE:-4}
warmup_large=${WARMUP_LARGE:-1}
dtype=float
mpi_modes=${MPI_MODES-none cma}
gloo=${GLOO:-1}
old=${WEFT_PERF_OLD:-}
table_only=${TABLE_ONLY:-0}

die() {
	echo "bench-vs-mpi: $*" >&2
	exit 1
}

# bytes SIZE: SIZE with an optional K/M/G suffix, in bytes.
bytes() {
	local v=${1%[bB]} m=1
	case $v in
	*[kK]) m=1024 v=${v%?} ;;
	*[mM]) m=$((1024 * 1024)) v=${v%?} ;;
	*[gG]) m=$((1024 * 1024 * 1024)) v=${v%?} ;;
	esac
	echo $((v * m))
}

mkdir -p "$out/raw"
status=0
if [[ $table_only != 1 ]]; then
	[[ -x $perf ]] || die "weft-perf not found at $perf (build it, or set WEFT_PERF)"
	[[ -z $old || -x $old ]] || die "WEFT_PERF_OLD is not an executable: $old"
	((runs >= 1)) || die "RUNS must be at least 1"
	if [[ -n $mpi_modes ]] && ! { command -v mpicc && command -v mpirun; } >/dev/null; then
		echo "bench-vs-mpi: no mpicc or mpirun here (apt-get install libopenmpi-dev openmpi-bin):" \
			"Open MPI is skipped, and with it the memory bandwidth and the floors" >&2
		mpi_modes=
	fi
	torchrun=()
	if [[ $gloo == 1 ]]; then
		if ! python3 -c 'import torch, torch.distributed' 2>/dev/null; then
			echo "bench-vs-mpi: python3 cannot import torch: gloo is skipped" >&2
			gloo=0
		elif [[ -n ${TORCHRUN:-} ]]; then
			read -ra torchrun <<<"$TORCHRUN"
		elif command -v torchrun >/dev/null; then
			torchrun=(torchrun)
		else
			torchrun=(python3 -m torch.distributed.run)
		fi
	fi

	# Every library stays on this host's loopback and shared memory: MPI
	# through its flags below, weft's bootstrap (and the ofi addresses that
	# follow it) here, gloo through MASTER_ADDR and its interface.
	export WEFT_CORE_BOOTSTRAP_ADDR=${WEFT_CORE_BOOTSTRAP_ADDR:-127.0.0.1}
	export GLOO_SOCKET_IFNAME=lo
	mpi_bench=$out/mpi_bench
	if [[ -n $mpi_modes ]]; then
		mpicc -O2 -o "$mpi_bench" "$src/tools/mpi_bench.c" || die "mpicc failed on tools/mpi_bench.c"
	fi

	{
		echo "date: $(date -Is)"
		echo "host: $(hostname) ($(nproc) cores, $(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo))"
		echo "cpu: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
		echo "numa: $(ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l) node(s)"
		echo "kernel: $(uname -r)"
		echo "weft-perf: $perf"
		[[ -z $old ]] || echo "old weft-perf: $old (commit ${WEFT_PERF_OLD_REV:-not given})"
		echo "weft git: $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$src" diff --quiet 2>/dev/null || echo ' (modified tree)')"
		[[ -z $mpi_modes ]] || echo "mpi: $(mpirun --version 2>&1 | head -1), single-copy modes: $mpi_modes"
		[[ $gloo != 1 ]] || echo "gloo: torch $(python3 -c 'import torch; print(torch.__version__)'), launched by ${torchrun[*]}"
		echo "weft environment: $(env | grep -E '^(WEFT_|FI_)' | sort | tr '\n' ' ')"
		echo "mpi environment: $(env | grep -E '^OMPI_' | sort | tr '\n' ' ')"
		echo "runs: $runs, ranks: $nps, collectives: $colls, sizes: $minb..$maxb x$factor, iters $iters" \
			"(above $large: $iters_large), warmup $warmup ($warmup_large), type $dtype"
		echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
	} >>"$out/env.txt"
fi

mpirun_cmd=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader --mca oob_tcp_if_include lo)

# run_one <log> <command...>: runs a sweep and appends its output to log;
# fails on a non-zero exit or a non-zero #wrong anywhere.
run_one() {
	local log=$1
	shift
	echo "+ $*" >>"$log"
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

# weft-perf's sizes up to LARGE, and those above it with fewer iterations,
# as two sweeps (sweep <log> <program and its flags...>).
large_b=$(bytes "$large")
first_large=$(bytes "$minb")
while ((first_large <= large_b)); do first_large=$((first_large * factor)); done
sweep() {
	local log=$1
	shift
	local small_e=$maxb rc=0
	(($(bytes "$maxb") > large_b)) && small_e=$large
	if (($(bytes "$minb") <= large_b)); then
		run_one "$log" "$@" -b "$minb" -e "$small_e" -f "$factor" -n "$iters" -w "$warmup" -d "$dtype" || rc=1
	fi
	if (($(bytes "$maxb") > large_b)); then
		run_one "$log" "$@" -b "$first_large" -e "$maxb" -f "$factor" -n "$iters_large" -w "$warmup_large" \
			-d "$dtype" || rc=1
	fi
	return $rc
}

for np in $nps; do
	[[ $table_only != 1 ]] || break
	t0=$(date +%s)
	echo "np $np: start $(date -Is)" >>"$out/stages.txt"
	for ((i = 1; i <= runs; i++)); do
		for coll in $colls; do
			[[ -z $old ]] || sweep "$out/raw/old-$coll-np$np-run$i.log" "$old" --np "$np" --collective "$coll" || status=1
			sweep "$out/raw/weft-$coll-np$np-run$i.log" "$perf" --np "$np" --collective "$coll" || status=1
			# mpi_bench scales its iterations itself: one mpirun per sweep.
			for mode in $mpi_modes; do
				run_one "$out/raw/mpi-$mode-$coll-np$np-run$i.log" "${mpirun_cmd[@]}" \
					--mca btl_vader_single_copy_mechanism "$mode" -np "$np" "$mpi_bench" --collective "$coll" \
					-b "$minb" -e "$maxb" -f "$factor" -n "$iters" -w "$warmup" -d "$dtype" --large "$large" \
					--iters-large "$iters_large" --warmup-large "$warmup_large" || status=1
			done
		done
		if [[ $gloo == 1 ]]; then
			port=$((29500 + RANDOM % 2000))
			glog=$out/raw/gloo-np$np-run$i.launch.log
			if ! MASTER_ADDR=127.0.0.1 "${torchrun[@]}" --nnodes 1 --nproc_per_node "$np" --master_addr 127.0.0.1 \
				--master_port "$port" "$src/tools/bench-gloo.py" --out "$out/raw/gloo" --collectives "${colls// /,}" \
				-b "$minb" -e "$maxb" -f "$factor" -n "$iters" -w "$warmup" --large "$large" \
				--iters-large "$iters_large" --warmup-large "$warmup_large" >"$glog" 2>&1; then
				echo "bench-vs-mpi: gloo failed at $np ranks, run $i (log: $glog)" >&2
				tail -5 "$glog" >&2
				status=1
			fi
			for coll in $colls; do
				[[ -f $out/raw/gloo-$coll.log ]] && mv "$out/raw/gloo-$coll.log" "$out/raw/gloo-$coll-np$np-run$i.log"
			done
		fi
		if [[ -n $mpi_modes ]]; then
			run_one "$out/raw/membw-np$np-run$i.log" "${mpirun_cmd[@]}" -np "$np" "$mpi_bench" --collective membw \
				-e 64M -n 5 || status=1
		fi
	done
	t1=$(date +%s)
	echo "np $np: end $(date -Is), $((t1 - t0)) s" >>"$out/stages.txt"
	((t1 - t0 <= 480)) || echo "bench-vs-mpi: the $np-rank stage took $((t1 - t0)) s (more than 8 minutes)" >&2
done
[[ $table_only == 1 ]] || echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/env.txt"

python3 - "$out" <<'PY' >"$out/table.md"
import glob, os, re, sys
from collections import defaultdict

out = sys.argv[1]
COLLS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall"]
PEERS = ["mpi-none", "mpi-cma", "gloo"]
times = defaultdict(list)  # (tool, coll, np, size) -> out-of-place times, one per run
membw = defaultdict(list)  # np -> [(copy, reduce)]
nps = set()
for path in glob.glob(os.path.join(out, "raw", "*.log")):
    base = os.path.basename(path)
    m = re.match(r"membw-np(\d+)-run\d+\.log$", base)
    if m:
        for line in open(path):
            g = re.search(r"copy_GBps ([\d.]+) reduce_GBps ([\d.]+)", line)
            if g:
                membw[int(m.group(1))].append((float(g.group(1)), float(g.group(2))))
        continue
    m = re.match(r"(weft|old|mpi-none|mpi-cma|gloo)-(\w+)-np(\d+)-run\d+\.log$", base)
    if not m or m.group(2) not in COLLS:
        continue
    tool, coll, np_ = m.group(1), m.group(2), int(m.group(3))
    nps.add(np_)
    for line in open(path):
        f = line.split()
        if len(f) >= 13 and f[0].isdigit():
            times[(tool, coll, np_, int(f[0]))].append(float(f[5]))

def quart(v):
    v = sorted(v)
    def at(q):
        x = q * (len(v) - 1)
        lo = int(x)
        hi = min(lo + 1, len(v) - 1)
        return v[lo] + (v[hi] - v[lo]) * (x - lo)
    return at(0.5), at(0.25), at(0.75)

def med(v):
    return quart(v)[0]

def floor_us(coll, n, size, bw):
    """The copies (bytes written by copying) and reductions (bytes written by
    a += b) the collective needs over all ranks, at the bandwidths of all
    ranks at once (GB/s): a lower bound that assumes every rank busy."""
    if not bw:
        return None
    copy, red = bw
    if coll == "all_reduce":
        return ((n - 1) * size / red + (n - 1) * size / copy) / 1e3
    if coll in ("reduce_scatter", "reduce"):
        return (n - 1) * size / red / 1e3
    return n * size / copy / 1e3  # all_gather, broadcast, alltoall: every output byte written once

def fmt(x):
    return "-" if x is None else ("%.2f" % x if x < 1000 else "%.0f" % x)

print("# weft-perf vs Open MPI and gloo")
print()
print("Median and interquartile range (Q1..Q3) over the runs of each library's out-of-place time per")
print("call in us (gloo: its only mode). mpi-none: Open MPI with btl_vader_single_copy_mechanism none;")
print("mpi-cma: with cma. best: the peer with the lowest median. behind: weft's median exceeds best's")
print("by more than 5% and the two ranges do not overlap; for such a point, floor is the copies and")
print("reductions it needs over all ranks at the memory bandwidth all ranks reached at once in the same")
print("stage (mpi_bench --collective membw), and x floor each library's median over it.")
env = os.path.join(out, "env.txt")
stages = os.path.join(out, "stages.txt")
if os.path.exists(stages):
    print()
    print("Stages: " + "; ".join(l.strip() for l in open(stages) if l.strip()))
summary = []
for n in sorted(nps):
    bw = None
    if membw[n]:
        bw = (med([c for c, _ in membw[n]]), med([r for _, r in membw[n]]))
        print()
        print("## %d ranks: memory bandwidth %.1f GB/s copy, %.1f GB/s reduce (all ranks at once, median of %d)"
              % (n, bw[0], bw[1], len(membw[n])))
    else:
        print()
        print("## %d ranks: no memory bandwidth measured (no floors)" % n)
    behind = []
    for coll in COLLS:
        sizes = sorted({s for (t, c, p, s) in times if c == coll and p == n})
        if not sizes:
            continue
        tools = ["weft"] + [t for t in ("old",) + tuple(PEERS) if any((t, coll, n, s) in times for s in sizes)]
        print()
        print("### %s, %d ranks" % (coll, n))
        print()
        print("| size (B) | " + " | ".join(tools) + " | best | weft/best | note |")
        print("|---:|" + "---:|" * len(tools) + ":---|---:|:---|")
        for s in sizes:
            cells, q = [], {}
            for t in tools:
                v = times.get((t, coll, n, s))
                if v:
                    q[t] = quart(v)
                    cells.append("%s (%s..%s)" % (fmt(q[t][0]), fmt(q[t][1]), fmt(q[t][2])))
                else:
                    cells.append("-")
            peers = [t for t in PEERS if t in q]
            note, best, ratio = "", "-", "-"
            if "weft" in q and peers:
                b = min(peers, key=lambda t: q[t][0])
                best = b
                r = q["weft"][0] / q[b][0] if q[b][0] > 0 else float("inf")
                ratio = "%.2f" % r
                if r > 1.05 and q["weft"][1] > q[b][2]:
                    fl = floor_us(coll, n, s, bw)
                    if fl:
                        dist = ", ".join("%s %.1fx" % (t, q[t][0] / fl) for t in ["weft"] + peers)
                        note = "**behind**: floor %s us; x floor: %s" % (fmt(fl), dist)
                    else:
                        note = "**behind** (no floor: no bandwidth measured)"
                    behind.append((coll, s, r))
            if "old" in q and "weft" in q:
                o = q["old"]
                w = q["weft"]
                ok = (0.95 <= w[0] / o[0] <= 1.05) or not (w[1] > o[2] or o[1] > w[2])
                note += ("; " if note else "") + "new/old %.3f%s" % (w[0] / o[0], "" if ok else " (ranges apart)")
            print("| %d | %s | %s | %s | %s |" % (s, " | ".join(cells), best, ratio, note))
    worst = max((r for _, _, r in behind), default=None)
    summary.append("- %d ranks: %d point(s) behind%s" % (n, len(behind), "" if not behind else
                   ", the worst %.2fx (%s)" % (worst, ", ".join("%s %d B %.2fx" % b for b in behind))))
print()
print("## Summary")
print()
print("\n".join(summary))
print()
print("Raw logs: %s/raw/; environment: %s" % (out, env))
PY
cat "$out/table.md"
((status == 0)) || echo "bench-vs-mpi: some runs failed or reported wrong data (see above)" >&2
exit "$status"
