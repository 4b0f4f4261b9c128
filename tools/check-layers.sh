#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The module graph of core/ must be a ladder: module X (X.c and X.h, a path
# under the folder without its extension) depends on Y when X.c or X.h
# includes "Y.h"; subfolders such as core/bootstrap/ count. Prints the graph's
# loops, if any, and exits 1; 0 when there are none.
# Usage: tools/check-layers.sh [folder] (default: core/ of this tree)
set -uo pipefail
dir=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/core}
[[ -d $dir ]] || {
	echo "check-layers: no folder $dir"
	exit 2
}
dir=$(cd "$dir" && pwd)
edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
nmod=0
while IFS= read -r f; do
	rel=${f#"$dir"/}
	mod=${rel%.*}
	nmod=$((nmod + 1))
	echo "$mod $mod" >>"$edges" # every module is a node, even without edges
	while IFS= read -r inc; do
		for cand in "$(dirname "$f")/$inc" "$dir/$inc"; do
			if [[ -f $cand ]]; then
				c=$(cd "$(dirname "$cand")" && pwd)/$(basename "$cand")
				dep=${c#"$dir"/}
				dep=${dep%.h}
				[[ $dep == "$mod" ]] || echo "$mod $dep" >>"$edges"
				break
			fi
		done
	done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done < <(find "$dir" -type f \( -name '*.c' -o -name '*.h' \) | sort)
out=$(tsort "$edges" 2>&1 >/dev/null)
if [[ -n $out ]]; then
	echo "check-layers: the module graph of $dir has loops (each module depends on the next):"
	printf '%s\n' "$out" | sed -n 's/^tsort: \([^:]*\)$/  \1/p; s/^tsort: .*loop.*/loop:/p'
	exit 1
fi
echo "check-layers: $nmod files of $dir form a ladder (no loops)"
