#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Commit subjects since the commit below (the last one before this script was
# added) read '<area>: <what>' in at most 72 characters, as the Linux kernel's
# and libfabric's do: the area is one to three words (a module, a plugin, a
# folder), the rest says what changed; figures and reasons go in the body.
# Merge commits are not checked. Exit 1 naming each subject that breaks it.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
base=ad9a94b12f0e765a4f9223da355d79a5ca11b896
if ! git cat-file -e "$base^{commit}" 2>/dev/null; then
	echo "check-commits: the base commit $base is not in this clone (a shallow clone?); fetch the history"
	exit 1
fi
bad=0
while IFS= read -r line; do
	sha=${line%% *}
	subj=${line#* }
	why=""
	if ((${#subj} > 72)); then
		why="${#subj} characters (at most 72)"
	elif ! [[ $subj =~ ^[A-Za-z0-9][A-Za-z0-9._/+-]*(\ [A-Za-z0-9][A-Za-z0-9._/+-]*){0,2}:\ [^\ ] ]]; then
		why="not '<area>: <what>'"
	fi
	if [[ -n $why ]]; then
		echo "check-commits: $sha '$subj': $why"
		bad=$((bad + 1))
	fi
done < <(git log --no-merges --format='%h %s' "$base..HEAD")
if ((bad)); then
	echo "check-commits: $bad subject(s) to reword"
	exit 1
fi
echo "check-commits: $(git rev-list --no-merges --count "$base..HEAD") subject(s) since ${base:0:7} read '<area>: <what>' in 72 characters or less"
