#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Drives weft-pack-conformance (tests/pack_conformance.c) for ctest:
#   pack_conformance.sh all BIN PACK "NP..."
#     every check BIN --list names for PACK, at every rank count, one line
#     each ("ok 12 allreduce-rsag/sizes np=3 (1.4 s)", "not ok ...", "# SKIP"),
#     the output of each failed check after its line; exits 1 if any failed.
#   pack_conformance.sh expect-fail BIN PACK CHECK NP PATTERN
#     the check must fail (exit 1) with a reason that matches the grep -E
#     PATTERN, in a verdict line that names the check; exits 0 when it does.
set -u
mode=$1
bin=$2
pack=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pack-conformance-sh.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM

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
# One plugin load for every run of the loop (pack_conformance.c).
export WEFT_PACK_CONFORMANCE_CATALOG="$tmp/catalog"
if ! "$bin" --list --target "$pack" >"$tmp/list" 2>"$tmp/list.err"; then
	echo "pack_conformance.sh: $bin --list --target $pack failed:"
	cat "$tmp/list.err"
	exit 1
fi
checks=$(cut -f1 "$tmp/list")
nchecks=$(printf '%s\n' "$checks" | wc -l)
nnp=$(echo $nps | wc -w)
echo "1..$((nchecks * nnp))"
i=0 failed=0 skipped=0 t_all=$(now)
for np in $nps; do
	for c in $checks; do
		i=$((i + 1))
		t0=$(now)
		"$bin" --run "$c" --np "$np" --target "$pack" --result "$tmp/result" >"$tmp/out" 2>&1
		st=$?
		dt=$(elapsed "$t0" "$(now)")
		reason=$(cat "$tmp/result" 2>/dev/null)
		case $st in
		0) echo "ok $i $c np=$np ($dt s)" ;;
		77)
			echo "ok $i $c np=$np ($dt s) # SKIP $reason"
			skipped=$((skipped + 1))
			;;
		*)
			echo "not ok $i $c np=$np ($dt s) # exit $st: $reason"
			sed 's/^/  | /' "$tmp/out"
			failed=$((failed + 1))
			;;
		esac
	done
done
echo "pack_conformance.sh: '$pack': $i checks in $(elapsed "$t_all" "$(now)") s, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
