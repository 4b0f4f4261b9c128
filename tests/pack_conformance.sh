#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Drives weft-pack-conformance (tests/pack_conformance.c) for ctest:
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

echo "usage: pack_conformance.sh expect-fail BIN PACK CHECK NP PATTERN" >&2
exit 2
