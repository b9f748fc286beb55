#!/usr/bin/env bash
# install-deps.sh — installs the Debian packages weft builds and tests with.
# Called by the Makefile when a header or tool is missing; safe to rerun.
set -euo pipefail

packages=(build-essential pkg-config libcriterion-dev libhwloc-dev libxml2-dev libnuma-dev libibverbs-dev libopenblas-dev iproute2 procps binutils)
# make check-includes (part of make test): scripts/check-includes.py.
packages+=(python3)
# weft-train --plot: the PNG loss curve.
packages+=(gnuplot-nox)
# make fuzz / test-fuzz: clang and its libFuzzer + sanitizer runtimes.
packages+=(clang libclang-rt-dev)
# make torch and its tests (tests/torch/): Debian's PyTorch, its headers, pybind11, pytest.
# `install-deps.sh --torch` installs only these (make torch calls it that way).
torch_packages=(python3-torch libtorch-dev pybind11-dev python3-dev python3-pytest g++)
if [ "${1:-}" = --torch ]; then packages=("${torch_packages[@]}"); else packages+=("${torch_packages[@]}"); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
