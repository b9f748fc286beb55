#!/usr/bin/env bash
#
# nvidia_headers.sh — NVIDIA's public headers of the release an NVIDIA/nccl
# checkout holds, made the way its own build makes them, for run_abi.sh.
#
# Usage: tests/abi/nvidia_headers.sh NCCL_SRC OUT_DIR
#
# nccl.h comes from src/nccl.h.in with the version of makefiles/version.mk
# put in; nccl_device.h and nccl_device/ are copied from src/include, and the
# DOCA GPUNetIO device headers nccl_device's GIN part includes are copied to
# where an installed NCCL has them. Prints the release ("2.30.7"); exits 1
# when the checkout lacks any of it, 2 on bad usage. Nothing is written
# outside OUT_DIR.

set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 NCCL_SRC OUT_DIR" >&2
  exit 2
fi
src=$1
out=$2
template=$src/src/nccl.h.in
versions=$src/makefiles/version.mk
for f in "$template" "$versions" "$src/src/include/nccl_device.h"; do
  [ -f "$f" ] || { echo "nvidia_headers: $f not found: not an NVIDIA/nccl checkout" >&2; exit 1; }
done

# NCCL_MAJOR := 2 and the like.
version_of() { sed -n "s/^$1[[:space:]]*:=[[:space:]]*\\([^[:space:]]*\\).*/\\1/p" "$versions" | head -n 1; }
major=$(version_of NCCL_MAJOR)
minor=$(version_of NCCL_MINOR)
patch=$(version_of NCCL_PATCH)
suffix=$(version_of NCCL_SUFFIX)
if [ -z "$major" ] || [ -z "$minor" ] || [ -z "$patch" ]; then
  echo "nvidia_headers: no version in $versions" >&2
  exit 1
fi
code=$(printf "%d%02d%02d" "$major" "$minor" "$patch")  # the 2.9-and-later formula

mkdir -p "$out"
sed -e "s/\${nccl:Major}/$major/g" -e "s/\${nccl:Minor}/$minor/g" -e "s/\${nccl:Patch}/$patch/g" \
  -e "s/\${nccl:Suffix}/$suffix/g" -e "s/\${nccl:Version}/$code/g" "$template" >"$out/nccl.h"
cp "$src/src/include/nccl_device.h" "$out/"
rm -rf "$out/nccl_device"
cp -R "$src/src/include/nccl_device" "$out/"

doca=$src/src/transport/net_ib/gdaki/doca-gpunetio/include
if [ -d "$doca" ]; then
  dest=$out/nccl_device/gin/gdaki/doca_gpunetio
  mkdir -p "$dest/common" "$dest/device"
  cp "$doca/doca_gpunetio_device.h" "$dest/"
  cp "$doca"/common/*.h "$dest/common/"
  cp "$doca"/device/*.cuh "$dest/device/"
fi
echo "$major.$minor.$patch"
