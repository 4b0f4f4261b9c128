#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Drives weft-pack-conformance (tests/pack_conformance.c) for ctest:
#   pack_conformance.sh all BIN PACK "NP..."
#     every check BIN --list names for PACK, at every rank count, one line
#     each ("ok 12 allreduce-rsag/sizes np=3 (1.4 s)", "not ok ...", "# SKIP"),
#     the output of each failed check after its line; exits 1 if any failed.
#     PACK_CONFORMANCE_JOBS checks run at once (default 2; the first, the
#     gate, alone).
#   pack_conformance.sh expect-fail BIN PACK CHECK NP PATTERN
#     the check must fail (exit 1) with a reason that matches the grep -E
#     PATTERN, in a verdict line that names the check; exits 0 when it does.
set -u
mode=$1
bin=$2
pack=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pack-conformance-sh.XXXXXX") || exit 2
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

if [ "$mode" = expect-fail ]; then
	check=$4 np=$5 pattern=$6
	"$bin" --run "$check" --np "$np" --target "$pack" --result "$tmp/result" >"$tmp/out" 2>&1
	st=$?
	reason=$(cat "$tmp/result" 2>/dev/null)
	cat "$tmp/out"
	if [ $st -ne 1 ]; then
		echo "pack_conformance.sh: $check np=$np exited $st, expected 1 (a failure): $reason"
		exit 1
	fi
	if ! printf '%s\n' "$reason" | grep -Eq -- "$pattern"; then
		echo "pack_conformance.sh: $check np=$np failed, but its reason does not match '$pattern': $reason"
		exit 1
	fi
	if ! grep -Fq "pack-conformance: $check np=$np: FAILED: $reason" "$tmp/out"; then
		echo "pack_conformance.sh: $check np=$np failed, but no verdict line names the check with its reason"
		exit 1
	fi
	echo "pack_conformance.sh: $check np=$np failed as it must: $reason"
	exit 0
fi

nps=$4
jobs=${PACK_CONFORMANCE_JOBS:-2}
# One plugin load for every run of the loop (pack_conformance.c).
export WEFT_PACK_CONFORMANCE_CATALOG="$tmp/catalog"
if ! "$bin" --list --target "$pack" >"$tmp/list" 2>"$tmp/list.err"; then
	echo "pack_conformance.sh: $bin --list --target $pack failed:"
	cat "$tmp/list.err"
	exit 1
fi
checks=$(cut -f1 "$tmp/list")
items=()
for np in $nps; do
	for c in $checks; do
		items+=("$c $np")
	done
done
echo "1..${#items[@]}"

# Each check runs in its own process group of ranks; up to $jobs at once
# (most of a check is waiting: sleeps, rendezvous, loading plugins), their
# lines printed in order as they complete.
run_one() { # index check np
	local t0 st
	t0=$(now)
	"$bin" --run "$2" --np "$3" --target "$pack" --result "$tmp/result.$1" >"$tmp/out.$1" 2>&1
	st=$?
	echo "$st $(elapsed "$t0" "$(now)")" >"$tmp/st.$1.tmp"
	mv "$tmp/st.$1.tmp" "$tmp/st.$1"
}
failed=0 skipped=0 next=1
flush() {
	local st dt reason c np
	while [ -f "$tmp/st.$next" ]; do
		read -r st dt <"$tmp/st.$next"
		read -r c np <<<"${items[$((next - 1))]}"
		reason=$(cat "$tmp/result.$next" 2>/dev/null)
		case $st in
		0) echo "ok $next $c np=$np ($dt s)" ;;
		77)
			echo "ok $next $c np=$np ($dt s) # SKIP $reason"
			skipped=$((skipped + 1))
			;;
		*)
			echo "not ok $next $c np=$np ($dt s) # exit $st: $reason"
			sed 's/^/  | /' "$tmp/out.$next"
			failed=$((failed + 1))
			;;
		esac
		next=$((next + 1))
	done
}
t_all=$(now)
for ((i = 1; i <= ${#items[@]}; i++)); do
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
		wait -n
		flush
	done
	read -r c np <<<"${items[$((i - 1))]}"
	run_one "$i" "$c" "$np" &
	# The gate runs alone: the others depend on it.
	if [ "$i" -eq 1 ]; then
		wait
		flush
		if [ $failed -ne 0 ]; then
			echo "pack_conformance.sh: the gate failed; nothing else runs"
			exit 1
		fi
	fi
	flush
done
wait
flush
echo "pack_conformance.sh: '$pack': ${#items[@]} checks in $(elapsed "$t_all" "$(now)") s ($jobs at a time), $failed failed, $skipped skipped"
[ $failed -eq 0 ]
