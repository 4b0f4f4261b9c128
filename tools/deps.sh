#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian packages weft's build and tests need, and only those that
# are missing. Quick no-op when everything is there. Where nothing can be
# installed (no apt-get, no registry) it carries on if the essentials are present:
# CMake then skips each plugin whose dependency is absent, saying why.
set -euo pipefail

# The packages, grouped by what needs them. Add a plugin's dependency here.
DEPS_PACKAGES=(
	# essentials: compiler, CMake, pkg-config
	build-essential cmake pkg-config
	# the test suite (Check)
	check
	# ofi plugin (libfabric), and fi_info for diagnosing providers
	libfabric-dev libfabric-bin
	# ucx plugin, and ucx_info
	libucx-dev ucx-utils
	# ib plugin (rdma-core verbs)
	libibverbs-dev
	# xgmi plugin: HIP headers (the HIP runtime is dlopened at run time), and
	# hipcc for the HIP compile check of include/weft/device.h
	libamdhip64-dev hipcc
	# topology
	libhwloc-dev
	# netns tests (ip netns, veth)
	iproute2
	# launcher tests (mpirun) and MPI-based examples
	openmpi-bin libopenmpi-dev
	# fuzzers and sanitizer builds; libclang-rt-14-dev holds libFuzzer and the
	# sanitizer runtimes, only recommended by clang (tools/fuzz.sh needs it)
	clang libclang-rt-14-dev
	# the Python package (python/) and its test: a venv seeing Debian's numpy,
	# built offline with setuptools (which needs wheel to make the wheel)
	python3-numpy python3-venv python3-setuptools python3-wheel
)

# The commands without which nothing builds at all.
have_essentials() {
	local missing=()
	command -v cmake >/dev/null 2>&1 || missing+=(cmake)
	command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
	if ! command -v cc >/dev/null 2>&1 && ! command -v gcc >/dev/null 2>&1 &&
		! command -v clang >/dev/null 2>&1; then
		missing+=("a C compiler")
	fi
	if ((${#missing[@]})); then
		echo "deps: essentials missing: ${missing[*]}" >&2
		return 1
	fi
	return 0
}

# Nothing installable here: succeed when the build can still run.
skip_or_fail() {
	local why=$1
	if have_essentials; then
		echo "deps: $why; skipping installation (plugins whose dependency is absent will be skipped by CMake)" >&2
		exit 0
	fi
	echo "deps: $why, and the essentials are missing: cannot build" >&2
	exit 1
}

if ! command -v dpkg-query >/dev/null 2>&1; then
	skip_or_fail "dpkg-query not found (not a Debian-like system)"
fi

missing=()
for p in "${DEPS_PACKAGES[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[[ $status == installed ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
	echo "deps: all ${#DEPS_PACKAGES[@]} packages present"
	exit 0
fi

echo "deps: missing: ${missing[*]}"

if ((EUID != 0)); then
	echo "deps: not root; install them with:" >&2
	echo "  apt-get install -y ${missing[*]}" >&2
	exit 1
fi

if ! command -v apt-get >/dev/null 2>&1; then
	skip_or_fail "apt-get not found"
fi

export DEBIAN_FRONTEND=noninteractive
if ! apt-get update -q; then
	skip_or_fail "apt-get update failed (no registry reachable?)"
fi
if ! apt-get install -y -q --no-install-recommends "${missing[@]}"; then
	skip_or_fail "apt-get install failed"
fi
echo "deps: installed ${missing[*]}"
