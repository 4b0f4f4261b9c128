#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A/B of weft-perf --op put and pingpong on loopback: the carried build (new)
# against .oldbuild's libweft and transports (before f76e82d), alternating.
set -u
cd "$(dirname "$0")/.."
p=.gpubuild/bin/weft-perf
export WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1 WEFT_OFI_ADDR=127.0.0.1 WEFT_UCX_NET_DEVICES=lo
for round in 1 2; do
	for v in old new; do
		if [[ $v == old ]]; then lp=$PWD/.oldbuild/lib; else lp=; fi
		for tp in ofi ucx; do
			if [[ $tp == ofi ]]; then e="WEFT_OFI_PROVIDER=tcp"; else e="UCX_TLS=tcp,self"; fi
			echo "### round $round $v $tp put"
			env $e LD_LIBRARY_PATH=$lp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout 60 $p --np 2 --op put --transport $tp --mem host -b 16K -e 64M -f 16 -w 3 -n 20 2>&1 | grep -E "^ +[0-9]|transport:|rror"
			echo "### round $round $v $tp pingpong"
			env $e LD_LIBRARY_PATH=$lp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout 60 $p --np 2 --op pingpong --transport $tp --mem host -b 8 -e 4K -f 512 -w 20 -n 500 2>&1 | grep -E "^ +[0-9]|rror"
		done
	done
done
