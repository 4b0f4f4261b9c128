#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Names the frames of the backtraces a test prints with WT_BACKTRACE=1
# ("lib.so(+0x1f2c)[...]" lines): file, function and line from the build's
# debug info, so a log brought back from the GPU machine reads as source.
# usage: tools/resolve-backtrace.sh LOG...   (run where the binaries were built)
set -u
command -v addr2line >/dev/null || { echo "resolve-backtrace: addr2line (binutils) not found" >&2; exit 1; }
cat "$@" | while IFS= read -r line; do
	if [[ $line =~ ^([^\(\ ]+)\((\+0x[0-9a-f]+)\)\[ ]] && [[ -f ${BASH_REMATCH[1]} ]]; then
		# An offset is a return address: the call sits one byte before it.
		off=$(printf '0x%x' $((${BASH_REMATCH[2]#+} - 1)))
		printf '%s  %s\n' "$line" "$(addr2line -f -C -i -p -e "${BASH_REMATCH[1]}" "$off" 2>/dev/null | head -3 | tr '\n' ' ')"
	else
		printf '%s\n' "$line"
	fi
done
