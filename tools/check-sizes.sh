#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# core/ stays readable in parts: no file over MAX_LINES lines (900) and no
# function over MAX_FUNC lines (150), counted from the '{' that opens a
# function's body in column 0 to the '}' that closes it in column 0 (the
# layout STYLE.md and .clang-format give). Prints each offender; exits 1.
# Usage: tools/check-sizes.sh [folder] (default: core/ of this tree)
set -uo pipefail
dir=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/core}
max_lines=${MAX_LINES:-900}
max_func=${MAX_FUNC:-150}
[[ -d $dir ]] || {
	echo "check-sizes: no folder $dir"
	exit 2
}
bad=0
nfiles=0
while IFS= read -r f; do
	nfiles=$((nfiles + 1))
	n=$(wc -l <"$f")
	if ((n > max_lines)); then
		echo "check-sizes: $f has $n lines (at most $max_lines)"
		bad=1
	fi
	out=$(awk -v f="$f" -v max="$max_func" '
		/^[A-Za-z_].*\(/ { head = $0 }
		/^\{/ { start = NR; name = head }
		/^\}/ { if (start && NR - start + 1 > max) printf "check-sizes: %s:%d: a function of %d lines (at most %d): %s\n", f, start, NR - start + 1, max, name; start = 0 }
	' "$f")
	if [[ -n $out ]]; then
		printf '%s\n' "$out"
		bad=1
	fi
done < <(find "$dir" -type f \( -name '*.c' -o -name '*.h' \) | sort)
((bad)) && exit 1
echo "check-sizes: $nfiles files of $dir, none over $max_lines lines, no function over $max_func"
