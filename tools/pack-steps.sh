#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The README's "Writing an algorithm pack" steps, run as a script, so that the
# steps a pack author follows are known to work: copy examples/pack-skeleton,
# rename it, build it standalone against include/, see weft-info list it, and
# run allreduce and allgather through it with [algorithm] rules at 2, 3, 4 and
# 8 ranks (weft-perf checks the data; the core's log names the algorithm).
# Registered as the ctest test pack_steps (tests/examples_pack.cmake).
#
#   tools/pack-steps.sh [--bin DIR] [--cc CC] [--work DIR] [--name NAME]
#     --bin   folder of weft-info and weft-perf (default: build/bin of the tree)
#     --cc    C compiler for the standalone build (default: CMake's choice)
#     --work  folder to work in, emptied first (default: a temporary one, removed)
#     --name  the new pack's name, [a-z0-9-]+ (default: mypack)
# Exit status: 0 when every step passed, 1 when one failed, 2 on bad usage.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=$root/build/bin
cc=
work=
name=mypack
while (($#)); do
	case $1 in
	--bin) bin=${2:?--bin needs a folder}; shift 2 ;;
	--cc) cc=${2:?--cc needs a compiler}; shift 2 ;;
	--work) work=${2:?--work needs a folder}; shift 2 ;;
	--name) name=${2:?--name needs a name}; shift 2 ;;
	-h | --help) sed -n '3,15p' "$0"; exit 0 ;;
	*) echo "pack-steps: unknown option $1 (--help lists them)" >&2; exit 2 ;;
	esac
done
if [[ ! $name =~ ^[a-z0-9-]+$ ]]; then
	echo "pack-steps: the name must match [a-z0-9-]+: $name" >&2
	exit 2
fi
for tool in weft-info weft-perf; do
	if [[ ! -x $bin/$tool ]]; then
		echo "pack-steps: no $bin/$tool: build the tree first, or pass --bin" >&2
		exit 2
	fi
done
if [[ -z $work ]]; then
	work=$(mktemp -d "${TMPDIR:-/tmp}/weft-pack-steps.XXXXXX")
	trap 'rm -rf "$work"' EXIT
else
	rm -rf "$work"
	mkdir -p "$work"
fi
# The environment name of the pack's parameters: WEFT_<NAME>_<KEY>.
upper=$(printf '%s' "$name" | tr 'a-z-' 'A-Z_')

nl=$'\n'
fail() {
	echo "pack-steps: $*" >&2
	exit 1
}
step() {
	echo "pack-steps: $*"
}

# ---- 1. Copy the skeleton and rename it: the descriptor's name, the file
# (libweft-<name>.so), the parameters' section and the rules all follow.
step "1. copy examples/pack-skeleton to $work/$name and rename skelpack to $name"
cp -r "$root/examples/pack-skeleton" "$work/$name"
sed -i "s/skelpack/$name/g; s/SKELPACK/$upper/g" "$work/$name/CMakeLists.txt" "$work/$name/pack.c"
if grep -rqi skelpack "$work/$name"; then
	fail "the copy still names skelpack: $(grep -rni skelpack "$work/$name" | head -3)"
fi

# ---- 2. Build it standalone against weft's headers (Release by default).
step "2. build it standalone against $root/include"
build=$work/$name/build
cmake -S "$work/$name" -B "$build" -DWEFT_INCLUDE_DIR="$root/include" ${cc:+-DCMAKE_C_COMPILER="$cc"} \
	-DCMAKE_C_FLAGS=-Werror >"$work/configure.log" 2>&1 || fail "configuring failed:${nl}$(cat "$work/configure.log")"
cmake --build "$build" >"$work/build.log" 2>&1 || fail "building failed:${nl}$(cat "$work/build.log")"
so=$build/libweft-$name.so
[[ -f $so ]] || fail "the build made no $so"

# ---- 3. See that weft finds it.
step "3. weft-info lists it with WEFT_PLUGIN_PATH=$build"
info=$(WEFT_PLUGIN_PATH=$build "$bin/weft-info" 2>&1) || fail "weft-info failed:${nl}$info"
grep -Eq "^ +$name +algorithm +ABI [0-9]+\.[0-9]+ +$so\$" <<<"$info" ||
	fail "weft-info does not list $name as a loaded algorithm pack:${nl}$info"
off=$(env "WEFT_${upper}_ENABLE=0" WEFT_PLUGIN_PATH="$build" "$bin/weft-info" 2>&1) || true
grep -q "REJECTED $so" <<<"$off" || fail "WEFT_${upper}_ENABLE=0 did not make $name decline:${nl}$off"

# ---- weft-plugin-check: the algorithm-pack checks on "$so", each of its
# algorithms forced in turn, at 2, 3, 4 and 8 ranks.
step "weft-plugin-check --np 2,3,4,8 $so"
"$bin/weft-plugin-check" --np 2,3,4,8 "$so" || fail "weft-plugin-check failed on $so"

# ---- 4. Select it with [algorithm] rules and run collectives through it.
conf=$work/weft.conf
cat >"$conf" <<EOF
[algorithm]
require $name/allreduce when coll=allreduce
require $name/allgather when coll=allgather
EOF
for np in 2 3 4 8; do
	for coll in all_reduce all_gather; do
		algo=$name/${coll/_/}
		step "4. weft-perf --np $np --collective $coll through $algo"
		log=$work/perf-$coll-np$np.log
		# weft-perf checks every size's data and exits 1 on a wrong element.
		if ! WEFT_CONFIG=$conf WEFT_PLUGIN_PATH=$build WEFT_LOG_LEVEL=info WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1 \
			timeout 300 "$bin/weft-perf" --np "$np" --collective "$coll" -b 1 -e 64K -f 4 -w 1 -n 2 \
			>"$log" 2>&1; then
			fail "weft-perf --np $np --collective $coll failed:${nl}$(tail -40 "$log")"
		fi
		used=$(grep -c "using $algo (rule " "$log" || true)
		((used >= np)) || fail "$np ranks, $coll: $used rank(s) logged 'using $algo':${nl}$(tail -40 "$log")"
	done
done
step "every step passed: $so serves allreduce and allgather at 2, 3, 4 and 8 ranks"
