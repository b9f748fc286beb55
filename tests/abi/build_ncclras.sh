#!/usr/bin/env bash
# build_ncclras.sh NCCL_SRC OUT — NVIDIA's RAS client, unmodified, as OUT.
#
# Compiles NCCL_SRC/src/ras/client.cc as NCCL's build makes ncclras (C++,
# NVIDIA's src/include on the path). weft's include/nccl.h stands in for the
# generated nccl.h (NVIDIA's needs CUDA's headers); it carries the same
# version numbers, which are all the client takes from it. Exits 0 when
# built, 77 when there is nothing to build with (says why), 1 when the
# build fails (its log on stderr).
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=${1:-}
out=${2:?usage: build_ncclras.sh NCCL_SRC OUT}
if [ -z "$src" ] || [ ! -f "$src/src/ras/client.cc" ]; then
  echo "NVIDIA's RAS client sources not found (set NCCL_SRC to an NVIDIA/nccl checkout with src/ras/client.cc)"
  exit 77
fi
command -v "${CXX:-g++}" >/dev/null || { echo "no C++ compiler (${CXX:-g++}) to build NVIDIA's ncclras"; exit 77; }
"${CXX:-g++}" -O1 -DNCCL_OS_LINUX -I"$here/../../include" -I"$src/src/include" -o "$out" "$src/src/ras/client.cc" >&2 || exit 1
