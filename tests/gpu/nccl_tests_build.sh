#!/usr/bin/env bash
#
# nccl_tests_build.sh — builds NVIDIA's nccl-tests, unmodified, against weft.
#
# Usage: tests/gpu/nccl_tests_build.sh PATH_TO_NCCL_TESTS [OUT_DIR]
#
# Why: weft claims to be a drop-in libnccl.so.2 with NCCL 2.30.7's headers.
# This proves it at build level on the reference program: nccl-tests
# compiles with only weft's nccl.h and nccl_device.h on its include path,
# links with only weft's libnccl.so (no other libnccl is visible to the
# linker, so every NCCL symbol it calls must be defined by weft), and every
# *_perf binary then loads weft's libnccl.so.2 through LD_LIBRARY_PATH.
#
# What it does: makes weft's library (make build/lib/libnccl.so.2), stages
# it as an NCCL install in OUT_DIR/nccl-home/{include,lib} (symlinks) and
# the CUDA runtime alone in OUT_DIR/cuda-lib (so CUDA's own libnccl, if the
# toolkit has one, is not on the link path), runs nccl-tests' make with
# BUILDDIR=OUT_DIR/build (nccl-tests writes nothing in its tree; checked
# with git status when it is a git checkout), then checks each binary:
# NEEDED has libnccl.so.2, RUNPATH is reported, ldd resolves libnccl.so.2 to
# weft's file, and each nccl* symbol it imports is exported by weft.
# Fetches nothing. Last line: "nccl-tests build: PASS|FAIL ...".
#
# Environment: CUDA_HOME (/usr/local/cuda), NVCC_GENCODE (Hopper only:
# sm_90 code plus compute_90 PTX), JOBS (nproc), BUILD (weft's build dir,
# "build"), NCCL_TESTS_MAKE_ARGS (more make arguments, word-split: e.g.
# "MPI=1 MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi NAME_SUFFIX=_mpi").
# Exit status 0 on PASS, 1 on FAIL, 2 on bad usage.

set -euo pipefail

usage() {
  echo "usage: $0 PATH_TO_NCCL_TESTS [OUT_DIR]" >&2
  exit 2
}
[ $# -ge 1 ] && [ $# -le 2 ] || usage
src=$(cd "$1" 2>/dev/null && pwd) || { echo "nccl_tests_build: no such directory: $1" >&2; exit 2; }
[ -f "$src/src/Makefile" ] && [ -f "$src/src/common.cu" ] || {
  echo "nccl_tests_build: $src does not look like an nccl-tests checkout (no src/Makefile)" >&2; exit 2; }
out=${2:-$(mktemp -d /tmp/weft-nccl-tests.XXXXXX)}
mkdir -p "$out"
out=$(cd "$out" && pwd)

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
gencode=${NVCC_GENCODE:--gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90}
jobs=${JOBS:-$(nproc)}
bdir=${BUILD:-build}
log=$out/build.log
[ -x "$cuda/bin/nvcc" ] || { echo "nccl_tests_build: no nvcc at $cuda/bin/nvcc (set CUDA_HOME)" >&2; exit 2; }

fail() {
  echo "nccl-tests build: FAIL $*"
  exit 1
}

# 1. weft's library.
echo "== weft: make $bdir/lib/libnccl.so.2"
make -C "$root" -s -j"$jobs" BUILD="$bdir" "$bdir/lib/libnccl.so.2" "$bdir/lib/libnccl.so" >"$out/weft-make.log" 2>&1 ||
  { tail -20 "$out/weft-make.log"; fail "weft's library did not build ($out/weft-make.log)"; }
weftlib=$(readlink -f "$root/$bdir/lib/libnccl.so.2")

# 2. Stage weft as NCCL_HOME, and CUDA's runtime alone as CUDA_LIB.
home=$out/nccl-home
rm -rf "$home" "$out/cuda-lib"
mkdir -p "$home/include" "$home/lib" "$out/cuda-lib"
ln -s "$root/include/nccl.h" "$root/include/nccl_device.h" "$home/include/"
ln -s "$weftlib" "$home/lib/libnccl.so.2"
ln -s libnccl.so.2 "$home/lib/libnccl.so"
for f in "$cuda"/lib64/libcudart.so*; do ln -s "$(readlink -f "$f")" "$out/cuda-lib/$(basename "$f")"; done
[ -e "$out/cuda-lib/libcudart.so" ] || fail "no libcudart.so in $cuda/lib64"

# 3. Build nccl-tests out of tree.
before="" is_git=0
if [ "$(git -C "$src" rev-parse --show-toplevel 2>/dev/null)" = "$src" ]; then  # its own checkout, not a parent's
  is_git=1
  before=$(git -C "$src" status --porcelain --untracked-files=all)
  echo "== nccl-tests $(git -C "$src" describe --always --dirty 2>/dev/null || true) at $src"
fi
read -r -a extra <<<"${NCCL_TESTS_MAKE_ARGS:-}"
echo "== make -C $src BUILDDIR=$out/build NCCL_HOME=$home CUDA_HOME=$cuda CUDA_LIB=$out/cuda-lib NVCC_GENCODE=\"$gencode\" ${extra[*]} -j$jobs"
start=$(date +%s)
if ! make -C "$src" -j"$jobs" BUILDDIR="$out/build" NCCL_HOME="$home" CUDA_HOME="$cuda" \
    CUDA_LIB="$out/cuda-lib" NVCC_GENCODE="$gencode" "${extra[@]}" >"$log" 2>&1; then
  grep -E "error|undefined reference" "$log" | head -20 || tail -20 "$log"
  fail "make failed after $(($(date +%s) - start)) s (log: $log)"
fi
echo "== built in $(($(date +%s) - start)) s (log: $log)"
if [ $is_git = 1 ]; then
  after=$(git -C "$src" status --porcelain --untracked-files=all)
  [ "$before" = "$after" ] || fail "the nccl-tests checkout changed during the build"
fi

# 4. Which nccl.h / nccl_device.h the compiler used: weft's, through the stage.
deps=$("$cuda/bin/nvcc" -std=c++17 -DNCCL_OS_LINUX -I"$home/include/" -I"$src/os" -I"$src/src" -M \
  "$src/src/all_reduce.cu" 2>&1) || fail "nvcc -M on all_reduce.cu failed: $deps"
for h in nccl.h nccl_device.h; do
  used=$(tr ' \\' '\n\n' <<<"$deps" | grep -E "/$h\$" | head -1)
  [ "$(readlink -f "$used")" = "$root/include/$h" ] || fail "$h came from ${used:-nowhere}, not weft's include/"
  echo "== $h: $used -> $root/include/$h"
done

# 5. Each binary: NEEDED, RUNPATH, what ldd resolves, imported symbols.
weftsyms=$(nm -D --defined-only "$weftlib" | awk '{print $3}' | sed 's/@.*//' | sort -u)
grep -qx weftGetVersion <<<"$weftsyms" || fail "$weftlib does not export weftGetVersion: not weft"
bins=$(find "$out/build" -maxdepth 1 -name '*_perf*' -type f | sort)
[ -n "$bins" ] || fail "no *_perf binary in $out/build"
n=0 bad=0 names=() nsyms=0
for b in $bins; do
  n=$((n + 1))
  name=$(basename "$b")
  needed=$(readelf -d "$b" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
  runpath=$(readelf -d "$b" | sed -n 's/.*(R\(UN\)\{0,1\}PATH).*\[\(.*\)\]/\2/p')
  resolved=$(LD_LIBRARY_PATH="$root/$bdir/lib" ldd "$b" | awk '$1 == "libnccl.so.2" {print $3}')
  imports=$(nm -D --undefined-only "$b" | awk '{print $2}' | sed 's/@.*//' | grep -E '^p?nccl' | sort -u)
  missing=$(comm -23 <(echo "$imports") <(echo "$weftsyms") | tr '\n' ' ')
  nsyms=$(echo "$imports" | grep -c . || true)
  ok=1
  grep -qw libnccl.so.2 <<<"$needed" || ok=0
  [ "$(readlink -f "${resolved:-/nonexistent}")" = "$weftlib" ] || ok=0
  [ -z "${missing// /}" ] || ok=0
  printf '%-22s NEEDED: %s| RUNPATH: %s | libnccl.so.2 -> %s | %d nccl symbols%s\n' "$name" "$needed" \
    "${runpath:-none}" "${resolved:-not found}" "$nsyms" "${missing:+, MISSING: $missing}"
  if [ $ok = 1 ]; then names+=("${name%_perf}"); else bad=$((bad + 1)); fi
done
[ $bad = 0 ] || fail "$bad of $n binaries do not link to weft ($out/build)"
echo "nccl-tests build: PASS $n/$n *_perf built with weft's headers and link to weft's libnccl.so.2 (LD_LIBRARY_PATH=$root/$bdir/lib): ${names[*]}; out: $out/build"
