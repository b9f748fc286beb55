#!/usr/bin/env bash
# tests/torch/suite/run.sh BUILD [WORLD_SIZE [PYTEST_ARGS...]] — PyTorch's own
# distributed suite on gloo, then on weft, with this system's PyTorch, and
# the comparison: every test gloo passes must pass on weft, unless weft is
# listed in KNOWN_DIFFERENCES (compare.py) with its reason. Results land in
# BUILD/torch-suite-<torch version>-<world size>/. About 16 minutes for
# gloo and 7 for weft on 2 cores; SUITE_BACKENDS=weft runs weft alone and
# compares with the gloo results already there. `make torch-suite` runs it here (torch 1.13),
# `make torch2-suite` in the Debian 13 root (torch 2.6).
set -euo pipefail
build=${1:?usage: tests/torch/suite/run.sh BUILD [WORLD_SIZE [PYTEST_ARGS...]]}
world=${2:-2}
shift $(($# < 2 ? $# : 2))
cd "$(dirname "$0")/../../.."
here=tests/torch/suite
mkdir -p "$build"
make -j2 --no-print-directory BUILD="$build" "$build/lib/libweft.so" torch >"$build/make.log" 2>&1 ||
  { tail -30 "$build/make.log"; echo "$here/run.sh: the build failed (log: $build/make.log)"; exit 1; }
version=$(/usr/bin/python3 -c 'import torch; print(torch.__version__.split("+")[0])')
out=$build/torch-suite-$version-$world
mkdir -p "$out"
path="$build/python:$here"
# The suite imports expecttest; Debian 12 does not package it.
/usr/bin/python3 -c 'import expecttest' 2>/dev/null || path="$path:$here/stubs"
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo} WORLD_SIZE=$world PYTHONPATH=$path
for backend in ${SUITE_BACKENDS:-gloo weft}; do
  echo "$here: torch $version, $world ranks, $backend"
  start=$SECONDS
  # A failing test is a result here, not an error of the run.
  BACKEND=$backend timeout --signal=KILL 3600 /usr/bin/python3 -m pytest -q -p no:cacheprovider \
    --junitxml="$out/$backend.xml" "$here/dist_suite.py" "$@" >"$out/$backend.log" 2>&1 || true
  echo "$here: $backend: $(tail -1 "$out/$backend.log") ($((SECONDS - start)) s)"
done
/usr/bin/python3 "$here/compare.py" "$out/gloo.xml" "$out/weft.xml" | tee "$out/compare.txt"
