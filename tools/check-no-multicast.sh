#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fails if anything in weft references NVLink multicast (the cuMulticast* driver
# API), which is out of scope: no source file outside docs/ and this script, and
# no built object in the given build folders (symbols via nm, and strings, which
# also catches a name looked up at run time with dlsym or cuGetProcAddress).
# Usage: tools/check-no-multicast.sh [build-dir...]   (default: none, sources only)
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
self=tools/$(basename "${BASH_SOURCE[0]}")
pattern=cuMulticast
found=0

# Sources: what git tracks plus untracked files it does not ignore, so that
# build folders and caches stay out; plain grep -r outside a git checkout.
cd "$src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	hits=$(git ls-files -z -c -o --exclude-standard -- . ":(exclude)docs" ":(exclude)$self" |
		xargs -0 -r grep -I -n -e "$pattern" -- 2>/dev/null || true)
else
	hits=$(grep -r -I -n -e "$pattern" --exclude-dir=.git --exclude-dir=docs \
		--exclude-dir='build*' --exclude="$(basename "$self")" . || true)
fi
if [[ -n $hits ]]; then
	echo "check-no-multicast: source files reference $pattern (NVLink multicast is out of scope):" >&2
	echo "$hits" >&2
	found=1
fi

# Build outputs: every ELF file (objects, plugins, libraries, executables).
nfiles=0
for dir in "$@"; do
	if [[ ! -d $dir ]]; then
		echo "check-no-multicast: $dir is not a folder" >&2
		exit 2
	fi
	while IFS= read -r -d '' f; do
		[[ $(head -c 4 "$f" 2>/dev/null | od -An -c | tr -d ' ') == 177ELF ]] || continue
		nfiles=$((nfiles + 1))
		syms=$(nm -A "$f" 2>/dev/null | grep -e "$pattern" || true)
		syms+=$(nm -D -A "$f" 2>/dev/null | grep -e "$pattern" || true)
		strs=$(strings -a "$f" | grep -e "$pattern" || true)
		if [[ -n $syms || -n $strs ]]; then
			echo "check-no-multicast: $f references $pattern:" >&2
			[[ -z $syms ]] || echo "$syms" >&2
			if [[ -n $strs ]]; then
				while IFS= read -r line; do echo "  string: $line"; done <<<"$strs" >&2
			fi
			found=1
		fi
	done < <(find "$dir" -type f \( -name '*.o' -o -name '*.so*' -o -name '*.a' -o -perm -u+x \) -print0)
done

if ((found)); then
	exit 1
fi
echo "check-no-multicast: clean (sources, and $nfiles ELF files in ${*:-no build folder})"
