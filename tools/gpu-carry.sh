#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Packs a build made on this machine for the device machine, whose minutes are
# scarce and whose build of the GPU targets takes minutes of them: the build's
# programs, libraries and plugins (debug info stripped, so they stay small) and
# its ctest files go to .gpubuild/ (git ignores it), with the source and build
# folders' absolute paths in .gpubuild/ORIGIN. tools/gpu-check.sh, run there
# from a tree that carries .gpubuild, links those paths to it and skips its
# build stage. The build must have the CUDA compiler (sm_90), as tools/test.sh
# gives it; tools/resolve-backtrace.sh reads the unstripped build here.
# usage: tools/gpu-carry.sh [BUILD_DIR]   (default build/); then run with
#   carry [".gpubuild", ".deb"] and: bash tools/gpu-check.sh test ...
set -euo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
b=$(cd "${1:-$src/build}" && pwd)
out=$src/.gpubuild
if [[ ! -x $b/bin/test_algo_gpu || ! -f $b/lib/weft/libweft-algo-gpu.so ]]; then
	echo "gpu-carry: $b has no GPU targets (configure it with the CUDA compiler, as tools/test.sh does)" >&2
	exit 2
fi
"$src/tools/check-no-multicast.sh" "$b"
rm -rf "$out"
mkdir -p "$out"
cp -a "$b/bin" "$b/lib" "$out/"
(cd "$b" && find . -path '*/CMakeFiles' -prune -o \( -name CTestTestfile.cmake -o -path './tests/*.conf' \) -print) |
	while IFS= read -r f; do
		mkdir -p "$out/$(dirname "$f")"
		cp "$b/$f" "$out/$f"
	done
find "$out" -type f | while IFS= read -r f; do
	[[ $(head -c 4 "$f" | od -An -c | tr -d ' ') == 177ELF ]] && strip --strip-debug "$f"
done
echo "$src $b" >"$out/ORIGIN"
echo "gpu-carry: $(du -sh "$out" | cut -f1) in $out, made at $b"
