#!/usr/bin/env bash
#
# nvidia_plugin_lib.sh — what the nvidia_*profiler*_plugin.sh scripts share,
# sourced: their arguments, NVIDIA's sources, CUDA's toolkit. Each need_*
# prints "SKIP: <reason>" and exits 0 when what it looks for is missing.
#
# plugin_build_dir ARGS...: the one argument, BUILD_DIR, made absolute in
#   $build (usage and exit 2 otherwise).
# need_nccl_src FOLDER FILE WHAT: $src ($NCCL_SRC) with FOLDER/FILE in it;
#   sets $plugin_dir to $src/FOLDER. WHAT names the plugin.
# need_cuda WHO FILE...: sets $cuda ($CUDA_HOME, default /usr/local/cuda)
#   and $cudart (its libcudart.so, which weft's programs do not load, so the
#   scripts preload it), with each FILE (a path under $cuda) present. WHO
#   names what needs them.
plugin_build_dir() {
  if [ $# -ne 1 ] || [ ! -d "$1" ]; then
    echo "usage: $0 BUILD_DIR" >&2
    exit 2
  fi
  build=$(cd "$1" && pwd)
}

need_nccl_src() {
  src=${NCCL_SRC:-}
  plugin_dir=$src/$1
  if [ -z "$src" ] || [ ! -f "$plugin_dir/$2" ]; then
    echo "SKIP: $3 not found (set NCCL_SRC to an NVIDIA/nccl checkout with $1)"
    exit 0
  fi
}

need_cuda() {
  local who=$1 f missing=""
  shift
  cuda=${CUDA_HOME:-/usr/local/cuda}
  cudart=""
  for f in "$cuda/lib64/libcudart.so" "$cuda/lib/libcudart.so" "$cuda"/lib64/libcudart.so.*; do
    [ -f "$f" ] && { cudart=$f; break; }
  done
  [ -n "$cudart" ] || missing=" libcudart.so"
  for f in "$@"; do [ -e "$cuda/$f" ] || missing="$missing $f"; done
  if [ -n "$missing" ]; then
    echo "SKIP: CUDA's${missing} not found under $cuda (set CUDA_HOME): $who needs them"
    exit 0
  fi
}
