#!/usr/bin/env bash
#
# run_abi.sh — weft's binary-compatibility suite against NVIDIA NCCL: the
# release weft's headers describe (2.30.7) and the one CUDA ships (2.28.9).
#
# Usage: tests/abi/run_abi.sh BUILD_DIR
#
# NVIDIA's headers come from two places: CUDA's include directory
# ($CUDA_HOME/include, default /usr/local/cuda/include; 2.28.9 today), and,
# when $NCCL_SRC names an NVIDIA/nccl checkout, the headers its build would
# install, made here by nvidia_headers.sh into BUILD_DIR/tests/abi/.
# A header of weft's own release must give identical facts; an older one
# may differ exactly as differences_from_<release>.txt lists
# (compare_facts.sh), so any other drift still fails.
#
# Checks, each reported PASS/FAIL:
#   - abi_facts.c built against weft's nccl.h without CUDA (WEFT_NO_CUDA),
#     with CUDA's headers and with NCCL_OS_LINUX, and against each NVIDIA
#     nccl.h: every build runs clean, weft's builds agree, and each NVIDIA
#     header compares as above (the NCCL_OS_LINUX build too, against a
#     header of weft's release);
#   - weft.h and nccl.h compile strictly as C11 and as C++, with and without
#     CUDA, and weft.h also stacks on top of each NVIDIA nccl.h;
#   - nccl_device.h's host part compiles as C11; with nvcc, device_facts.cu
#     (struct layouts, initializers, entry-point types, the device calls
#     nccl-tests makes) built against weft's and each NVIDIA nccl_device.h,
#     compared as above;
#   - check_exports.sh on BUILD_DIR/lib/libnccl.so.2, against each NVIDIA
#     nccl.h and against weft's nccl.h and nccl_device.h;
#   - with $NCCL_SRC, nvidia_<kind>_plugin.sh: NVIDIA's example plugins built
#     unmodified (tuner, net, profiler, env) and its Inspector profiler, each
#     loaded at its newest version, and nvidia_ras_client.sh: NVIDIA's ncclras
#     asking a weft job;
#   - abi_link.c, compiled only against NVIDIA's nccl.h from CUDA, linked
#     and run on weft's library (never NVIDIA's, which sits in CUDA's lib64:
#     the binary carries an RPATH to BUILD_DIR/lib, which outranks
#     LD_LIBRARY_PATH, and the program itself proves it found weft);
#   - abi_link_230.c, compiled only against a 2.30 nccl.h (NCCL_SRC's, else
#     CUDA's if that is 2.30 or later, else weft's own), run the same way:
#     grow, suspend/resume, memory statistics and one-sided calls across
#     the processes it forks.
# What has no header to work with prints "SKIP: <reason>" (abi_link is then
# built against weft's own header). Ends with "N passed, M failed"; exits 1
# if any check failed, 2 on bad usage.

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

# release_of NCCL_H: "2.30.7" from its version macros.
release_of() {
  local f=$1
  printf '%s.%s.%s\n' "$(sed -n 's/^#define NCCL_MAJOR \([0-9]*\).*/\1/p' "$f")" \
    "$(sed -n 's/^#define NCCL_MINOR \([0-9]*\).*/\1/p' "$f")" "$(sed -n 's/^#define NCCL_PATCH \([0-9]*\).*/\1/p' "$f")"
}
weft_rel=$(release_of "$root/include/nccl.h")
nv_rel=""
[ -n "$nv_inc" ] && nv_rel=$(release_of "$nv_inc/nccl.h")

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

# ---- NVIDIA's headers of an NVIDIA/nccl checkout, made as its build makes them.

src_inc=""
src_rel=""
if [ -n "${NCCL_SRC:-}" ]; then
  if src_rel=$("$here/nvidia_headers.sh" "$NCCL_SRC" "$out/nvidia-src/include" 2>"$out/nvidia_headers.log"); then
    src_inc=$out/nvidia-src/include
    echo "NVIDIA NCCL $src_rel headers made from $NCCL_SRC"
  else
    echo "FAIL: nvidia_headers ($NCCL_SRC; log: $out/nvidia_headers.log)"
    sed 's/^/    /' "$out/nvidia_headers.log"
    failed=$((failed + 1))
  fi
else
  skip "NCCL_SRC not set (an NVIDIA/nccl checkout): weft's headers not compared with NVIDIA's $weft_rel"
fi
if [ -n "$src_inc" ] && [ -z "$cuda_inc" ]; then
  skip "CUDA's cuda_runtime.h not found: NVIDIA's $src_rel nccl.h (which includes it) cannot be compiled"
fi

# compare_facts NAME SECTION RELEASE NVIDIA_FACTS WEFT_FACTS [REQUIRED]: a
# header of weft's release must match exactly; an older one as its list of
# differences says. Without such a list: FAIL when REQUIRED, else SKIP.
compare_facts() {
  local name=$1 section=$2 rel=$3 nv=$4 weft=$5 required=${6:-}
  local list=$here/differences_from_$rel.txt
  if [ "$rel" = "$weft_rel" ]; then
    check "$name" diff -u "$nv" "$weft"
  elif [ -f "$list" ]; then
    check "$name" "$here/compare_facts.sh" "$section" "$list" "$nv" "$weft"
  elif [ -n "$required" ]; then
    echo "FAIL: $name (weft's headers are NCCL $weft_rel; no differences_from_$rel.txt for NVIDIA's $rel)"
    failed=$((failed + 1))
  else
    skip "no differences_from_$rel.txt: $section facts of NVIDIA's $rel not compared"
  fi
}

# ---- abi_facts: weft's builds agree; each NVIDIA header compares.

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
check facts_weft_oslinux facts weft-oslinux "${cstrict[@]}" -DWEFT_NO_CUDA -DNCCL_OS_LINUX -I"$root/include"

if [ -n "$nv_inc" ]; then
  # NVIDIA's header must be the only nccl.h on this command line.
  check facts_nvidia facts nvidia "${cstrict[@]}" -isystem "$nv_inc"
  [ -f "$out/facts.nvidia.txt" ] &&
    compare_facts facts_weft_vs_nvidia_$nv_rel nccl.h "$nv_rel" "$out/facts.nvidia.txt" "$out/facts.weft-nocuda.txt"
else
  skip "NVIDIA's nccl.h not found in $cuda_home/include (set CUDA_HOME): facts not compared with CUDA's"
fi
if [ -n "$src_inc" ] && [ -n "$cuda_inc" ]; then
  check facts_nvidia_src facts nvidia-src "${cstrict[@]}" -isystem "$src_inc" -isystem "$cuda_inc"
  check facts_nvidia_src_oslinux facts nvidia-src-oslinux "${cstrict[@]}" -DNCCL_OS_LINUX -isystem "$src_inc" \
    -isystem "$cuda_inc"
  [ -f "$out/facts.nvidia-src.txt" ] &&
    compare_facts facts_weft_vs_nvidia_src_$src_rel nccl.h "$src_rel" "$out/facts.nvidia-src.txt" \
      "$out/facts.weft-nocuda.txt" required
  if [ "$src_rel" = "$weft_rel" ] && [ -f "$out/facts.nvidia-src-oslinux.txt" ]; then
    check facts_weft_vs_nvidia_src_oslinux diff -u "$out/facts.nvidia-src-oslinux.txt" "$out/facts.weft-oslinux.txt"
  fi
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
# weft.h on top of NVIDIA's nccl.h (in the -isystem directories given): the
# shared guard makes weft's a no-op.
header_stacked() {
  printf '%s\n' '#include <nccl.h>' '#include "weft.h"' \
    'ncclResult_t probe(cudaStream_t s);' \
    'ncclResult_t probe(cudaStream_t s) { return weftStreamQuery(s); }' \
    | "$CC" -std=c11 -Wall -Wextra -Werror "$@" -iquote "$root/include" -fsyntax-only -x c -
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
  check header_stacked_on_nvidia header_stacked -isystem "$nv_inc"
fi
if [ -n "$src_inc" ] && [ -n "$cuda_inc" ]; then
  check header_stacked_on_nvidia_src header_stacked -isystem "$src_inc" -isystem "$cuda_inc"
fi

# ---- nccl_device.h: the host part as C11; with nvcc, the layouts against
# NVIDIA's nccl_device.h and the device-side names nccl-tests uses.

device_h_c() {
  printf '%s\n' '#include "nccl_device.h"' \
    'ncclResult_t probe(ncclComm_t c, ncclDevComm_t *d);' \
    'ncclResult_t probe(ncclComm_t c, ncclDevComm_t *d) {' \
    '  ncclDevCommRequirements_t r = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;' \
    '  ncclCommProperties_t p = {sizeof(p), NCCL_API_MAGIC, NCCL_VERSION_CODE, 0, 0, 0, 0, 0, 0,' \
    '                            NCCL_GIN_TYPE_NONE, 0, 0, NCCL_GIN_TYPE_NONE};' \
    '  if (ncclCommQueryProperties(c, &p) != ncclSuccess) return ncclInvalidUsage;' \
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
    [ -f "$out/device_facts.nvidia.txt" ] && [ -f "$out/device_facts.weft.txt" ] &&
      compare_facts device_facts_weft_vs_nvidia_$nv_rel nccl_device.h "$nv_rel" "$out/device_facts.nvidia.txt" \
        "$out/device_facts.weft.txt"
  else
    skip "NVIDIA's nccl_device.h not found in $cuda_home/include: device layouts not compared with CUDA's"
  fi
  if [ -n "$src_inc" ]; then
    check device_facts_nvidia_src device_facts nvidia-src -I"$src_inc"
    [ -f "$out/device_facts.nvidia-src.txt" ] && [ -f "$out/device_facts.weft.txt" ] &&
      compare_facts device_facts_weft_vs_nvidia_src_$src_rel nccl_device.h "$src_rel" \
        "$out/device_facts.nvidia-src.txt" "$out/device_facts.weft.txt" required
  fi
else
  skip "no nvcc at $nvcc: nccl_device.h's CUDA part not compiled"
fi

# ---- The library: exports, then a foreign program running on it.

if [ ! -f "$lib" ]; then
  echo "FAIL: library_present ($lib not found; build the library first)"
  failed=$((failed + 1))
else
  if [ -n "$nv_inc" ]; then
    check exports_nvidia_$nv_rel "$here/check_exports.sh" "$lib" "$nv_inc/nccl.h"
  fi
  if [ -n "$src_inc" ]; then
    check exports_nvidia_src_$src_rel "$here/check_exports.sh" "$lib" "$src_inc/nccl.h"
  fi
  check exports_weft_header "$here/check_exports.sh" "$lib" "$root/include/nccl.h"
  check exports_weft_device_header "$here/check_exports.sh" "$lib" "$root/include/nccl_device.h"

  # link_build PROGRAM FLAGS...: build tests/abi/PROGRAM.c against the given
  # header only, on weft.
  link_build() {
    local prog=$1
    shift
    rm -f "$out/$prog"
    "$CC" -std=c11 -Wall -Wextra -Werror -O2 "$@" "$here/$prog.c" -o "$out/$prog" \
      -L"$libdir" -l:libnccl.so.2 -Wl,--disable-new-dtags -Wl,-rpath,"$libdir" -ldl
  }
  # link_run PROGRAM: run it with weft's lib first everywhere, and confirm
  # which file served ncclGetVersion.
  # A sanitizer build of the library needs its runtime loaded first, since
  # the foreign program itself is not instrumented.
  local_preload=$(ldd "$lib" 2>/dev/null | awk '/libasan\.so/ {print $3}')
  link_run() {
    local prog=$1 got want
    LD_PRELOAD="$local_preload${LD_PRELOAD:+:$LD_PRELOAD}" \
    LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      "${run_timeout[@]}" "$out/$prog" | tee "$out/$prog.out" || return 1
    want=$(readlink -f "$lib")
    got=$(sed -n "s/^$prog: ncclGetVersion comes from //p" "$out/$prog.out")
    if [ -n "$got" ] && [ "$(readlink -f "$got")" != "$want" ]; then
      echo "ncclGetVersion was served by $got, not $want"
      return 1
    fi
    grep -q "^ok $prog" "$out/$prog.out"
  }

  # abi_link: the calls every release has, built against CUDA's nccl.h.
  if [ -n "$nv_inc" ]; then
    check abi_link_build link_build abi_link -isystem "$nv_inc"
  else
    skip "NVIDIA's nccl.h not found: abi_link built against weft's own header"
    check abi_link_build link_build abi_link -DWEFT_NO_CUDA -I"$root/include"
  fi
  if [ -x "$out/abi_link" ]; then
    check abi_link_run link_run abi_link
  fi
  # abi_link_230: the calls 2.30 added, built against a 2.30 nccl.h.
  nv_minor=$(sed -n 's/^#define NCCL_MINOR \([0-9]*\).*/\1/p' "${nv_inc:-/dev/null}/nccl.h" 2>/dev/null)
  if [ -n "$src_inc" ] && [ -n "$cuda_inc" ]; then
    echo "abi_link_230 built against NVIDIA's $src_rel nccl.h from NCCL_SRC"
    check abi_link_230_build link_build abi_link_230 -isystem "$src_inc" -isystem "$cuda_inc"
  elif [ -n "$nv_inc" ] && [ "${nv_minor:-0}" -ge 30 ]; then
    echo "abi_link_230 built against NVIDIA's $nv_rel nccl.h from CUDA"
    check abi_link_230_build link_build abi_link_230 -isystem "$nv_inc"
  else
    skip "no NVIDIA nccl.h of 2.30 or later that compiles here (NCCL_SRC and CUDA's headers): abi_link_230 built against weft's own header"
    check abi_link_230_build link_build abi_link_230 -DWEFT_NO_CUDA -I"$root/include"
  fi
  if [ -x "$out/abi_link_230" ]; then
    check abi_link_230_run link_run abi_link_230
  fi
  # NVIDIA's own plugins, unmodified, when their sources are at hand.
  # Each script builds one kind's example (tuner, net, profiler, env) or the Inspector and skips, saying why,
  # where that example or what it needs is missing.
  if [ -n "${NCCL_SRC:-}" ] && [ -d "$NCCL_SRC/plugins" ]; then
    for script in "$here"/nvidia_*_plugin.sh; do
      kind=$(basename "$script" .sh)
      check "$kind" "$script" "$build"
    done
  else
    skip "NVIDIA's plugin sources not found (set NCCL_SRC to an NVIDIA/nccl checkout): their example plugins not loaded"
  fi
  # NVIDIA's RAS client (ncclras), unmodified, asking a weft job.
  if [ -n "${NCCL_SRC:-}" ] && [ -f "$NCCL_SRC/src/ras/client.cc" ]; then
    check nvidia_ras_client "$here/nvidia_ras_client.sh" "$build"
  else
    skip "NVIDIA's RAS client sources not found (set NCCL_SRC to an NVIDIA/nccl checkout): ncclras not built"
  fi
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
