#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Comments say why; measurements live in docs/perf/. Fails (exit 1) on any
# comment line in core/, plugins/ or tools/ that gives a measured figure: a
# number with a unit of time, rate or ratio beside a word of comparison or of
# a machine. A line that names a docs/perf file is a reference, not a figure.
# Usage: tools/check-comments.sh [folder...] (default: core plugins tools)
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
(($#)) || set -- core plugins tools
num='[0-9][0-9.,]*(-[0-9][0-9.,]*)?'
unit='( ?(us|µs|ms|ns|GB/s|MB/s|GiB/s|Gb/s|Gbit/s|%)|x)'
word='(faster|slower|quicker|beat|beats|ahead|behind|measured|took|VM|[0-9]+-core)'
comment='(/\*|^[[:space:]]*\*|//|^[[:space:]]*#)'
hits=$(grep -rnE --include='*.c' --include='*.h' --include='*.cu' --include='*.cuh' \
	--include='*.sh' --include='*.py' --include='*.cmake' --include='CMakeLists.txt' \
	"$comment.*\\b$num$unit([^A-Za-z0-9]|$)" "$@" |
	grep -iE "\\b$word\\b" | grep -v 'docs/perf/' |
	grep -v '^tools/check-comments.sh:')
if [[ -n $hits ]]; then
	echo "check-comments: comments that give a measured figure (move it to docs/perf/ and cite the file):"
	printf '%s\n' "$hits"
	exit 1
fi
echo "check-comments: no measured figures in the comments of $*"
