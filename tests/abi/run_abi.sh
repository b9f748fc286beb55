#!/usr/bin/env bash
#
# run_abi.sh — weft's binary-compatibility suite against NVIDIA NCCL 2.28.9.
#
# Usage: tests/abi/run_abi.sh BUILD_DIR
#
# Checks, each reported PASS/FAIL:
#   - abi_facts.c built against weft's nccl.h without CUDA (WEFT_NO_CUDA),
#     against weft's nccl.h with CUDA's headers, and against NVIDIA's nccl.h:
#     every build runs clean and all outputs are identical;
#   - weft.h and nccl.h compile strictly as C11 and as C++, with and without
#     CUDA, and weft.h also stacks on top of NVIDIA's nccl.h;
#   - nccl_device.h's host part compiles as C11; with nvcc, device_facts.cu
#     (struct layouts, entry-point types, the device calls nccl-tests makes)
#     built against weft's and NVIDIA's nccl_device.h gives identical output;
#   - check_exports.sh on BUILD_DIR/lib/libnccl.so.2, against NVIDIA's
#     header and against weft's own;
#   - with $NCCL_SRC (an NVIDIA/nccl checkout), nvidia_plugins.sh: NVIDIA's
#     example tuner built unmodified and loaded at v6 into a 2-rank sweep;
#   - abi_link.c, compiled only against NVIDIA's nccl.h, linked and run on
#     weft's library (never NVIDIA's, which sits in CUDA's lib64: the binary
#     carries an RPATH to BUILD_DIR/lib, which outranks LD_LIBRARY_PATH, and
#     the program itself proves it found weft).
# Where NVIDIA's header is absent (looked for in $CUDA_HOME/include, by
# default /usr/local/cuda/include), its parts print "SKIP: <reason>" and
# abi_link is built against weft's own header instead. Ends with
# "N passed, M failed"; exits 1 if any check failed, 2 on bad usage.

set -uo pipefail  # not -e: a failing check is counted, and the suite goes on

if [ $# -ne 1 ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
[ -d "$1" ] || { echo "run_abi: no such build directory: $1" >&2; exit 2; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "$1" && pwd)
libdir=$build/lib
lib=$libdir/libnccl.so.2
out=$build/tests/abi
mkdir -p "$out"

CC=${CC:-cc}
CXX=${CXX:-c++}
cstrict=(-std=c11 -Wall -Wextra -Werror -Wpedantic -Wstrict-prototypes -O2)
run_timeout=(timeout 60)
command -v timeout >/dev/null || run_timeout=()

# NVIDIA's nccl.h and CUDA's runtime headers, if present ($CUDA_HOME, when
# set, is the only place looked at).
cuda_home=${CUDA_HOME:-/usr/local/cuda}
nv_inc=""
[ -f "$cuda_home/include/nccl.h" ] && nv_inc=$cuda_home/include
cuda_inc=""
[ -f "$cuda_home/include/cuda_runtime.h" ] && cuda_inc=$cuda_home/include

passed=0
failed=0

# check NAME CMD...: run CMD with output in $out/NAME.log; report the result.
check() {
  local name=$1
  shift
  if "$@" >"$out/$name.log" 2>&1; then
    echo "PASS: $name"
    passed=$((passed + 1))
  else
    echo "FAIL: $name (log: $out/$name.log)"
    tail -n 20 "$out/$name.log" | sed 's/^/    /'
    failed=$((failed + 1))
  fi
}

skip() { echo "SKIP: $*"; }

# ---- abi_facts: three builds, one answer.

# facts TAG COMPILER-FLAGS...: build abi_facts, run it into facts.TAG.txt.
facts() {
  local tag=$1
  shift
  "$CC" "$@" "$here/abi_facts.c" -o "$out/abi_facts.$tag" &&
    "${run_timeout[@]}" "$out/abi_facts.$tag" >"$out/facts.$tag.txt"
}

check facts_weft_nocuda facts weft-nocuda "${cstrict[@]}" -DWEFT_NO_CUDA -I"$root/include"
if [ -n "$cuda_inc" ]; then
  check facts_weft_cuda facts weft-cuda "${cstrict[@]}" -I"$root/include" -isystem "$cuda_inc"
else
  skip "CUDA's cuda_runtime.h not found: weft's nccl.h built without WEFT_NO_CUDA falls back to its own cudaStream_t"
  check facts_weft_cuda facts weft-cuda "${cstrict[@]}" -I"$root/include"
fi
check facts_weft_same diff -u "$out/facts.weft-nocuda.txt" "$out/facts.weft-cuda.txt"

if [ -n "$nv_inc" ]; then
  # NVIDIA's header must be the only nccl.h on this command line.
  check facts_nvidia facts nvidia "${cstrict[@]}" -isystem "$nv_inc"
  # Facts weft's header already takes from NCCL 2.30 (ahead_of_2.28.txt) are
  # left out when NVIDIA's header is older than that; every other fact must match.
  nv_minor=$(sed -n 's/^#define NCCL_MINOR \([0-9]*\).*/\1/p' "$nv_inc/nccl.h")
  if [ "${nv_minor:-0}" -lt 30 ]; then
    ahead=$(grep -v '^#' "$here/ahead_of_2.28.txt" | awk 'NF {print $1}')
    for tag in nvidia weft-nocuda; do
      grep -v -w -F "$ahead" "$out/facts.$tag.txt" >"$out/facts.$tag.common.txt"
    done
    check facts_weft_vs_nvidia diff -u "$out/facts.nvidia.common.txt" "$out/facts.weft-nocuda.common.txt"
  else
    check facts_weft_vs_nvidia diff -u "$out/facts.nvidia.txt" "$out/facts.weft-nocuda.txt"
  fi
else
  skip "NVIDIA's nccl.h not found (set CUDA_HOME): facts not compared with NVIDIA's"
fi

# ---- The public headers on their own, strictly, in C and C++.

header_c() {
  printf '%s\n' '#include "weft.h"' '#include "nccl.h"' \
    '#if WEFT_VERSION_CODE != 100 || WEFT_UNIQUE_ID_STRLEN != 257' '#error weft.h macros' '#endif' \
    'ncclResult_t probe(cudaStream_t s);' \
    'ncclResult_t probe(cudaStream_t s) { return weftStreamSynchronize(s); }' \
    | "$CC" "${cstrict[@]}" "$@" -fsyntax-only -x c -
}
header_cxx() {
  printf '%s\n' '#include "weft.h"' \
    'static_assert(sizeof(ncclUniqueId) == NCCL_UNIQUE_ID_BYTES, "id");' \
    'int main() {' \
    '  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;' \
    '  ncclSimInfo_t s = NCCL_SIM_INFO_INITIALIZER;' \
    '  cudaStream_t st = nullptr;' \
    '  (void)st;' \
    '  return (int)(c.size + s.size) + (int)ncclGroupStart();' \
    '}' | "$CXX" -std=c++11 -Wall -Wextra -Werror -Wpedantic "$@" -fsyntax-only -x c++ -
}
# weft.h on top of NVIDIA's nccl.h: the shared guard makes weft's a no-op.
header_stacked() {
  printf '%s\n' '#include <nccl.h>' '#include "weft.h"' \
    'ncclResult_t probe(cudaStream_t s);' \
    'ncclResult_t probe(cudaStream_t s) { return weftStreamQuery(s); }' \
    | "$CC" -std=c11 -Wall -Wextra -Werror -isystem "$nv_inc" -iquote "$root/include" -fsyntax-only -x c -
}

check header_c_nocuda header_c -DWEFT_NO_CUDA -I"$root/include"
if [ -n "$cuda_inc" ]; then
  check header_c_cuda header_c -I"$root/include" -isystem "$cuda_inc"
fi
if command -v "$CXX" >/dev/null; then
  check header_cxx_nocuda header_cxx -DWEFT_NO_CUDA -I"$root/include"
  if [ -n "$cuda_inc" ]; then
    check header_cxx_cuda header_cxx -I"$root/include" -isystem "$cuda_inc"
  fi
else
  skip "no C++ compiler ($CXX): C++ header checks"
fi
if [ -n "$nv_inc" ]; then
  check header_stacked_on_nvidia header_stacked
fi

# ---- nccl_device.h: the host part as C11; with nvcc, the layouts against
# NVIDIA's nccl_device.h and the device-side names nccl-tests uses.

device_h_c() {
  printf '%s\n' '#include "nccl_device.h"' \
    'ncclResult_t probe(ncclComm_t c, ncclDevComm_t *d);' \
    'ncclResult_t probe(ncclComm_t c, ncclDevComm_t *d) {' \
    '  ncclDevCommRequirements_t r = {0};' \
    '  r.lsaBarrierCount = ncclTeamWorld(c).nRanks;' \
    '  return ncclDevCommCreate(c, &r, d);' \
    '}' | "$CC" "${cstrict[@]}" "$@" -fsyntax-only -x c -
}
# device_facts TAG FLAGS...: build device_facts.cu with nvcc, run it.
device_facts() {
  local tag=$1
  shift
  "$nvcc" -std=c++17 -arch=sm_90 "$@" "$here/device_facts.cu" -o "$out/device_facts.$tag" &&
    "${run_timeout[@]}" "$out/device_facts.$tag" >"$out/device_facts.$tag.txt"
}
check device_h_c device_h_c -DWEFT_NO_CUDA -I"$root/include"
nvcc=$cuda_home/bin/nvcc
if [ -x "$nvcc" ]; then
  check device_facts_weft device_facts weft -I"$root/include"
  if [ -f "$cuda_home/include/nccl_device.h" ]; then
    check device_facts_nvidia device_facts nvidia
    check device_facts_weft_vs_nvidia diff -u "$out/device_facts.nvidia.txt" "$out/device_facts.weft.txt"
  else
    skip "NVIDIA's nccl_device.h not found: device layouts not compared"
  fi
else
  skip "no nvcc at $nvcc: nccl_device.h's CUDA part not compiled"
fi

# ---- The library: exports, then a foreign program running on it.

if [ ! -f "$lib" ]; then
  echo "FAIL: library_present ($lib not found; build the library first)"
  failed=$((failed + 1))
else
  check exports "$here/check_exports.sh" "$lib"
  # weft's own header declares more than 2.28.9's (the 2.30 calls taken so far): all exported too.
  check exports_weft_header "$here/check_exports.sh" "$lib" "$root/include/nccl.h"

  # link_build FLAGS...: build abi_link against the given header only, on weft.
  link_build() {
    rm -f "$out/abi_link"
    "$CC" -std=c11 -Wall -Wextra -Werror -O2 "$@" "$here/abi_link.c" -o "$out/abi_link" \
      -L"$libdir" -l:libnccl.so.2 -Wl,--disable-new-dtags -Wl,-rpath,"$libdir" -ldl
  }
  # link_run: run it with weft's lib first everywhere, and confirm which file
  # served ncclGetVersion.
  # A sanitizer build of the library needs its runtime loaded first, since
  # the foreign program itself is not instrumented.
  local_preload=$(ldd "$lib" 2>/dev/null | awk '/libasan\.so/ {print $3}')
  link_run() {
    local got want
    LD_PRELOAD="$local_preload${LD_PRELOAD:+:$LD_PRELOAD}" \
    LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      "${run_timeout[@]}" "$out/abi_link" | tee "$out/abi_link.out" || return 1
    want=$(readlink -f "$lib")
    got=$(sed -n 's/^abi_link: ncclGetVersion comes from //p' "$out/abi_link.out")
    if [ -n "$got" ] && [ "$(readlink -f "$got")" != "$want" ]; then
      echo "ncclGetVersion was served by $got, not $want"
      return 1
    fi
    grep -q '^ok abi_link' "$out/abi_link.out"
  }

  if [ -n "$nv_inc" ]; then
    check abi_link_build link_build -isystem "$nv_inc"
  else
    skip "NVIDIA's nccl.h not found: abi_link built against weft's own header"
    check abi_link_build link_build -DWEFT_NO_CUDA -I"$root/include"
  fi
  if [ -x "$out/abi_link" ]; then
    check abi_link_run link_run
  fi
  # NVIDIA's own plugins, unmodified, when their sources are at hand.
  if [ -n "${NCCL_SRC:-}" ] && [ -f "$NCCL_SRC/plugins/tuner/example/plugin.c" ]; then
    check nvidia_plugins "$here/nvidia_plugins.sh" "$build"
  else
    skip "NVIDIA's plugin sources not found (set NCCL_SRC to an NVIDIA/nccl checkout): their example plugins not loaded"
  fi
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
