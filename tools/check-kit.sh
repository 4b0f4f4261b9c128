#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Plugins use include/weft/kit.h instead of keeping their own copies of what
# it holds: each copy drifted (five codecs, three error-name tables, six sets
# of parameter getters, each with its own bounds and messages). Fails (exit 1)
# naming file:line for any host source (.c, .h) under the folder that has:
#   codec     a function defined at column 0 whose name reads like a byte
#             codec (get/put/load/store/read/write/rd/wr/enc/dec, then
#             optionally le/be and u, then 16/32/64, e.g. shm_get_u32), or a
#             byte assembled by shifting by a multiple of 8 (`<< (8 * i)`,
#             `p[1] << 8`): use weft_kit_le_* or weft_kit_rd / weft_kit_wr;
#   errnames  WEFT_ERR_FIRST or WEFT_ERR_LAST (a table indexed by code), a
#             "WEFT_ERR_..." string, or a case returning a string straight
#             away (case -EAGAIN: return "..."): use weft_kit_errname or
#             weft_kit_strerror;
#   getter    a call of the core's param_get: declare rows and read them with
#             weft_kit_params_declare / weft_kit_params_load.
# Comment lines are skipped; device code (.cu) cannot call the host kit and
# is not checked. Usage: tools/check-kit.sh [folder] (default: plugins/)
set -uo pipefail
if (($#)); then
	dir=$1
else
	cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
	dir=plugins
fi
[[ -d $dir ]] || {
	echo "check-kit: no folder $dir"
	exit 2
}
codec_def='^[A-Za-z_][A-Za-z0-9_ *]*[^A-Za-z0-9_]([A-Za-z0-9_]*_)?(get|put|load|store|read|write|rd|wr|enc|dec)_?(le|be)?_?u?(16|32|64)[[:space:]]*\([^;]*$'
codec_shift='(<<|>>)[[:space:]]*\(?[[:space:]]*8[[:space:]]*\*|\[[0-9]+\][[:space:]]*<<[[:space:]]*(8|16|24|32|40|48|56)\b'
errnames='WEFT_ERR_(FIRST|LAST)|"WEFT_ERR_|case[[:space:]]+-?[A-Z][A-Z0-9_]*:[[:space:]]*return[[:space:]]+"'
getter='param_get[[:space:]]*\('

# grep -n over the sources, less comment lines and the kit's own names;
# prints "file:line: what: text".
scan() {
	local what=$1 re=$2
	grep -rnE --include='*.c' --include='*.h' "$re" "$dir" |
		awk -v what="$what" '{
			i = index($0, ":"); j = index(substr($0, i + 1), ":")
			where = substr($0, 1, i + j - 1); text = substr($0, i + j + 1)
			if (text ~ /^[ \t]*(\/\*|\*|\/\/)/ || text ~ /^[A-Za-z_].*[^A-Za-z0-9_]weft_kit_[A-Za-z0-9_]*[ \t]*\(/)
				next
			sub(/^[ \t]+/, "", text)
			printf "check-kit: %s: %s: %s\n", where, what, text
		}'
}

out=$(
	scan codec "$codec_def"
	scan codec "$codec_shift"
	scan errnames "$errnames"
	scan getter "$getter"
)
if [[ -n $out ]]; then
	printf '%s\n' "$out" | sort -t: -k2,2 -k3,3n
	echo "check-kit: use include/weft/kit.h instead (docs/plugin-abi.md, section 11)"
	exit 1
fi
echo "check-kit: no plugin source under $dir keeps its own codec, error-name table or parameter getter"
