#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every source and script of the tree (C, CUDA, HIP, headers, linker maps,
# shell, CMake, Python, sanitizer lists, templates) names its license in its
# first lines, as LICENSE's Apache-2.0. Prints each file that does not; exit 1
# if any. Documentation, recorded logs and test data are not sources.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
missing=0
while IFS= read -r f; do
	case $f in
	docs/* | fuzz/corpus/*) continue ;;
	*.c | *.h | *.cu | *.hip | *.map | *.sh | *.cmake | *.py | *.supp | *.in | */CMakeLists.txt | CMakeLists.txt | .ci/run | \
		.clang-format) ;;
	*) continue ;;
	esac
	[[ -f $f ]] || continue
	if ! head -n 3 "$f" | grep -q 'SPDX-License-Identifier: Apache-2.0'; then
		echo "check-spdx: $f has no 'SPDX-License-Identifier: Apache-2.0' in its first 3 lines"
		missing=$((missing + 1))
	fi
done < <(git ls-files --cached --others --exclude-standard)
if ((missing)); then
	echo "check-spdx: $missing file(s) without a license line"
	exit 1
fi
echo "check-spdx: every source and script names its license"
