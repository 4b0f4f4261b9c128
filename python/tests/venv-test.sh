#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Python package as a user installs it (run by ctest, tests/python.cmake):
# a venv made from python3 (Debian's) with --system-site-packages, the
# install line of python/README.md run in it from the source tree, then
# test_numpy.py with the venv's python3 against this build's libweft.so.
# Usage: venv-test.sh PYTHON3 WORKDIR LIBWEFT. Exit 77 (skip) only where venv
# or numpy is missing (Debian: python3-venv, python3-numpy).
set -uo pipefail
py=$1 work=$2 lib=$3
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
venv=$work/venv

[[ -x $py ]] || { echo "SKIP: no python3 at '$py'"; exit 77; }
rm -rf "$venv"
mkdir -p "$work"
if ! out=$("$py" -m venv --system-site-packages "$venv" 2>&1); then
	echo "SKIP: $py -m venv failed (Debian: python3-venv): $out"
	exit 77
fi
if ! out=$("$venv/bin/python3" -c 'import numpy' 2>&1); then
	echo "SKIP: numpy is not importable in a venv of $py (Debian: python3-numpy): $out"
	exit 77
fi

# The README's line, in the activated venv, from the source tree. No index:
# anything pip would download is a missing package, not a wait on the network.
(
	cd "$src" &&
		export PATH="$venv/bin:$PATH" VIRTUAL_ENV="$venv" PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 &&
		python3 -m pip install --no-build-isolation ./python
) || {
	echo "venv-test: 'python3 -m pip install --no-build-isolation ./python' failed" >&2
	exit 1
}

# From the work folder, so that the installed package is imported, not python/weft.
cd "$work" && WEFT_LIB=$lib exec "$venv/bin/python3" "$src/python/tests/test_numpy.py"
