#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# weft-info's output for one of the tree's test configs, in one mode, against
# its golden file: the guard that moves inside the core change nothing a user
# sees. What differs from machine to machine is normalized first: the tree's
# paths, each plugin's probe detail (devices, library versions), the host's
# NUMA and NVLink facts, and the devices of transports other than shm.
# Usage: golden.sh WEFT_INFO CONF MODE [--update]
#   MODE: plain | config | topo | select | select4 (select with --np 4)
#   --update rewrites expected/<conf>.<mode>.txt instead of comparing.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
info=$1 conf=$2 mode=$3 update=${4:-}
cfg=$here/configs/$conf.conf
want=$here/expected/$conf.$mode.txt
[[ -x $info && -f $cfg ]] || {
	echo "golden: no weft-info at $info or no config $cfg"
	exit 2
}
case $mode in
plain) args=() ;;
config) args=(-c) ;;
topo) args=(--topo) ;;
select) args=(--select) ;;
select4) args=(--select --np 4) ;;
*)
	echo "golden: unknown mode $mode"
	exit 2
	;;
esac
bdir=$(cd "$(dirname "$info")/.." && pwd)
# Only the config file speaks: a WEFT_* variable of the caller's shell (a
# machine's loopback rule, say) would show in -c as the value's source.
envargs=()
for v in $(compgen -e); do
	[[ $v == WEFT_* ]] && envargs+=(-u "$v")
done
# select: its communicator of one keeps its bootstrap and UCX on loopback.
[[ $mode == select* ]] && envargs+=(WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1 WEFT_UCX_NET_DEVICES=lo)
out=$(env "${envargs[@]}" WEFT_CONFIG="$cfg" "$info" "${args[@]}" 2>&1)
rc=$?
# The search path and plugin paths name the build tree; the config its path.
got=$(printf '%s\n' "$out" | sed -e "s|$bdir|@BUILD@|g" -e "s|$here|@GOLDEN@|g" | awk -v mode="$mode" '
	# plain: a loaded plugin row is followed by its probe detail (6 blanks).
	mode == "plain" && /^      / { next }
	# topo: the host facts, then each transport; only shm has fixed devices.
	mode == "topo" && /^(numa|nvlink:|  no NUMA|  [0-9]+ PCI|  node|    node)/ { next }
	mode == "topo" && /^  [a-z0-9-]+: [0-9]+ device/ { tp = $1; sub(/:$/, "", tp); if (tp != "shm") { print "  " tp ": (devices of this machine)"; skip = 1; next } skip = 0 }
	mode == "topo" && skip && /^    / { next }
	# select: which device of a transport serves a class depends on the machine.
	mode ~ /^select/ { gsub(/device [^ ]+ \(/, "device @DEV@ (") }
	# select: which transports open depends on the devices of the machine.
	mode ~ /^select/ && /^  not opened here: / { next }
	{ print }
')
got+=$'\n'"exit status $rc"
if [[ $update == --update ]]; then
	printf '%s\n' "$got" >"$want"
	echo "golden: wrote $want"
	exit 0
fi
[[ -f $want ]] || {
	echo "golden: no golden file $want (run with --update to make it)"
	exit 1
}
if ! diff -u "$want" <(printf '%s\n' "$got"); then
	echo "golden: weft-info ${args[*]} with $conf.conf differs from $want (above: - golden, + now)"
	exit 1
fi
echo "golden: weft-info ${args[*]} with $conf.conf matches $(basename "$want")"
