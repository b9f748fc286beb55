#!/usr/bin/env bash
# tests/torch/run.sh BUILD — builds libweft and the torch backend in BUILD
# against this system's PyTorch and runs tests/torch with pytest. `make
# test-torch2` runs it inside the Debian 13 root (torch 2.6); on the machine
# itself (torch 1.13) tests/run.sh runs the same pytest as part of make test.
set -euo pipefail
build=${1:?usage: tests/torch/run.sh BUILD}
cd "$(dirname "$0")/../.."
mkdir -p "$build"
make -j2 --no-print-directory BUILD="$build" "$build/lib/libweft.so" torch >"$build/make.log" 2>&1 ||
  { tail -30 "$build/make.log"; echo "tests/torch/run.sh: the build failed (log: $build/make.log)"; exit 1; }
/usr/bin/python3 -c 'import sys, torch; print(f"tests/torch: torch {torch.__version__}, python {sys.version.split()[0]}")'
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
PYTHONPATH="$build/python:tests/torch" exec timeout --signal=KILL 1800 \
  /usr/bin/python3 -m pytest -q -rs -p no:cacheprovider tests/torch
