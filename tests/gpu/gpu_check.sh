#!/usr/bin/env bash
#
# gpu_check.sh — the device checks for a lent GPU machine, in one script.
#
# Usage: tests/gpu/gpu_check.sh [PATH_TO_NCCL_TESTS]
#
# Why: weft's GPU work is judged on a machine that has a GPU, which most
# sessions do not get; this script is prepared ahead so one short run there
# answers everything (tests/gpu/README.md, docs/gpu.md). It prints one line
# per check, "gpu-check: <check>: PASS|FAIL|SKIP|N/A <detail>", and ends
# with "gpu-check: N passed, M failed, K skipped, L n/a in S s".
#
# Steps, each under `timeout`:
#   1. builds weft's library, weftrun and perf programs (make -j16);
#   2. builds nccl-tests from PATH_TO_NCCL_TESTS with tests/gpu/nccl_tests_build.sh
#      (skipped, saying so, without the path; nothing fetched is committed,
#      so the checkout travels beside the repo, see tests/gpu/README.md);
#   3. runs all_reduce, all_gather, reduce_scatter, broadcast, reduce,
#      alltoall and sendrecv_perf with 2 and 4 ranks on GPU 0 (-g 1), from
#      8 B to MAXBYTES, once with NVIDIA's libnccl.so.2 (PyTorch's wheel)
#      and once with weft's: ranks as threads (-t N); as processes with
#      mpirun when it and an MPI build exist, else weft's own perf programs
#      under build/bin/weftrun (host memory). A run passes when it exits 0,
#      prints "Out of bounds values : 0 OK" and every #wrong is 0;
#   4. runs tests/gpu/gpu_torch_check.py (2 processes) with NVIDIA's NCCL, then
#      with LD_PRELOAD of weft's libnccl.so.2, and compares the two.
# NVIDIA's NCCL refuses two ranks of one process on one GPU ("Duplicate
# GPU"): those runs are reported N/A. Processes name distinct hosts with
# NCCL_HOSTID so it accepts them (traffic goes over loopback sockets).
#
# Prebuilt inputs (a device machine with no compiler headers or no network):
# WEFT_LIB_DIR (a folder holding weft's libnccl.so.2: no weft build; the
# weftrun runs are skipped), NCCL_TESTS_BIN (a folder of nccl-tests
# *_perf binaries: no nccl-tests build), EXTRA_LIB_DIR (shared libraries
# weft needs that the machine lacks, e.g. libhwloc, libxml2, libnuma),
# NCCL_TESTS_MPI_BIN (a folder of nccl-tests *_perf_mpi binaries built with
# MPI=1), MPI_PREFIX (an Open MPI staged by tests/gpu/gpu_pack.sh; its mpirun runs
# the MPI builds as processes, all on GPU 0),
# COLLS (the collectives to run), NRANKS ("2 4"), RUN_TIMEOUT (seconds per
# nccl-tests run, 120), PERF_DEVICE (set: weft's own *_perf with --device 1
# under weftrun and as threads of one process, up to MAXBYTES, plus
# PERF_ARGS, and the same with WEFT_CUDA_IPC=1, PyTorch included),
# IPC_ONLY (set: only the IPC path's runs, the copy bandwidth and the
# PyTorch checks), TEST_CUDA_STREAM (test_cuda_stream to run with
# WEFT_TEST_REAL_CUDA=1; build/tests/multirank's by default, with
# PERF_DEVICE or IPC_ONLY), SKIP_TORCH (set: no
# PyTorch or copy-bandwidth checks), SKIP_NVIDIA (set: no
# NVIDIA nccl-tests runs, e.g. when threads on one GPU are all it could do).
#
# Environment: OUT (results, default build/gpu-check), MAXBYTES (1G),
# HOSTMAX (64M: the largest size of the weftrun host-memory runs),
# ITERS (5), JOBS (16), NVIDIA_NCCL (path of NVIDIA's libnccl.so.2; found
# in PyTorch's nvidia-nccl wheel by default), NO_MPI (set: no MPI build,
# the process mode uses weftrun), PYTHON (python3).

set -uo pipefail   # no -e: a failed check is reported, and the script goes on

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
tests=${1:-}
out=${OUT:-$root/build/gpu-check}
maxbytes=${MAXBYTES:-1G}
hostmax=${HOSTMAX:-64M}
iters=${ITERS:-5}
jobs=${JOBS:-16}
py=${PYTHON:-python3}
mkdir -p "$out"
t0=$(date +%s)
if [ -n "${EXTRA_LIB_DIR:-}" ]; then  # only the libraries the machine lacks, so none shadows its own
  mkdir -p "$out/extra-lib"
  for f in "$EXTRA_LIB_DIR"/*.so*; do
    ldconfig -p 2>/dev/null | grep -q "^[[:space:]]*$(basename "$f") " || ln -sf "$(readlink -f "$f")" "$out/extra-lib/"
  done
  echo "== carried libraries used: $(ls "$out/extra-lib" | tr '\n' ' ')"
  export LD_LIBRARY_PATH=$out/extra-lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
if [ -n "${MPI_PREFIX:-}" ]; then  # an Open MPI staged by tests/gpu/gpu_pack.sh
  . "$root/tests/gpu/mpi_env.sh" "$MPI_PREFIX"
  echo "== Open MPI: $(mpirun --version 2>&1 | head -1) from $MPI_PREFIX"
fi
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d
done
npass=0 nfail=0 nskip=0 nna=0
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}

say() {  # say CHECK STATUS DETAIL
  case $2 in PASS) npass=$((npass + 1)) ;; FAIL) nfail=$((nfail + 1)) ;; SKIP) nskip=$((nskip + 1)) ;;
    *) nna=$((nna + 1)) ;; esac
  echo "gpu-check: $1: $2 $3"
}

# ---- 0. The machine.
gpu=$(nvidia-smi -L 2>/dev/null | head -1)
[ -n "$gpu" ] || gpu=$(timeout 60 "$py" -c 'import torch; print(torch.cuda.get_device_name(0))' 2>/dev/null)
echo "== ${gpu:-no GPU visible (nvidia-smi -L)}; nvcc $("${CUDA_HOME:-/usr/local/cuda}"/bin/nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' || echo 'not found')"
nv=${NVIDIA_NCCL:-$(timeout 60 "$py" -c 'import nvidia.nccl, os, glob; print(sorted(glob.glob(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so*")))[0])' 2>/dev/null || true)}
[ -n "$nv" ] || nv=$(ldconfig -p 2>/dev/null | awk '$1 == "libnccl.so.2" {print $NF; exit}')
if [ -n "$nv" ] && [ -f "$nv" ]; then
  nvdir=$out/nvidia-lib
  mkdir -p "$nvdir" && ln -sf "$(readlink -f "$nv")" "$nvdir/libnccl.so.2"
  echo "== NVIDIA NCCL: $nv"
else
  nvdir=""
  echo "== NVIDIA NCCL: not found (set NVIDIA_NCCL); its baseline runs are skipped"
fi

# ---- 1. weft. The build needs hwloc, libxml2 and libnuma headers; the
# Makefile would apt-get them, which cannot work on a machine without a
# network, so check first and mark the dependencies present.
missing=""
for h in hwloc.h numa.h; do echo "#include <$h>" | gcc -E - >/dev/null 2>&1 || missing="$missing $h"; done
echo '#include <libxml/parser.h>' | gcc -E $(pkg-config --cflags libxml-2.0 2>/dev/null || echo -I/usr/include/libxml2) - \
  >/dev/null 2>&1 || missing="$missing libxml/parser.h"
weft_ok=0
if [ -n "${WEFT_LIB_DIR:-}" ]; then
  if [ -f "$WEFT_LIB_DIR/libnccl.so.2" ]; then
    weft_ok=2
    say weft-build PASS "prebuilt: $WEFT_LIB_DIR/libnccl.so.2 ($(LD_LIBRARY_PATH=$LD_LIBRARY_PATH ldd "$WEFT_LIB_DIR/libnccl.so.2" | grep -c 'not found') missing libraries)"
  else
    say weft-build FAIL "WEFT_LIB_DIR=$WEFT_LIB_DIR has no libnccl.so.2"
  fi
elif [ -n "$missing" ]; then
  say weft-build FAIL "missing headers:$missing (carry the -dev packages; see tests/gpu/README.md)"
else
  mkdir -p build && touch build/.deps-ok
  perfs=$(ls perf/*_perf.c | sed 's|perf/\(.*\)\.c|build/bin/\1|')
  if timeout 300 make -s -j"$jobs" build/lib/libnccl.so.2 build/lib/libnccl.so build/bin/weftrun $perfs \
      >"$out/weft-build.log" 2>&1; then
    weft_ok=1
    say weft-build PASS "build/lib/libnccl.so.2, weftrun, $(echo $perfs | wc -w) perf programs ($(($(date +%s) - t0)) s)"
  else
    say weft-build FAIL "see $out/weft-build.log: $(grep -m1 -i error "$out/weft-build.log")"
  fi
fi
weftdir=${WEFT_LIB_DIR:-$root/build/lib}

# ---- 2. nccl-tests.
bindir=""
if [ -n "${NCCL_TESTS_BIN:-}" ]; then
  bindir=$NCCL_TESTS_BIN
  say nccl-tests-build PASS "prebuilt: $(ls "$bindir"/*_perf 2>/dev/null | wc -l) binaries in $bindir"
elif [ -z "$tests" ] || [ ! -f "$tests/src/common.cu" ]; then
  say nccl-tests-build SKIP "no nccl-tests checkout given (usage: tests/gpu/gpu_check.sh /path/to/nccl-tests)"
elif [ $weft_ok = 0 ]; then
  say nccl-tests-build SKIP "weft did not build"
else
  if JOBS=$jobs timeout 400 tests/gpu/nccl_tests_build.sh "$tests" "$out/nccl-tests" >"$out/nccl-tests-build.log" 2>&1; then
    bindir=$out/nccl-tests/build
    say nccl-tests-build PASS "$(tail -1 "$out/nccl-tests-build.log" | sed 's/^nccl-tests build: PASS //' | cut -c1-160)"
  else
    say nccl-tests-build FAIL "$(tail -1 "$out/nccl-tests-build.log")"
  fi
  if [ -n "${NCCL_TESTS_MPI_BIN:-}" ]; then
    : # prebuilt, below
  elif [ -z "${NO_MPI:-}" ] && command -v mpirun >/dev/null && mpicc -showme:incdirs >/dev/null 2>&1; then
    mpihome=$(dirname "$(mpicc -showme:incdirs | awk '{print $1}')")
    NCCL_TESTS_MAKE_ARGS="MPI=1 MPI_HOME=$mpihome NAME_SUFFIX=_mpi" JOBS=$jobs timeout 400 \
      tests/gpu/nccl_tests_build.sh "$tests" "$out/nccl-tests-mpi" >"$out/nccl-tests-mpi-build.log" 2>&1 &&
      mpibin=$out/nccl-tests-mpi/build
  fi
fi
mpibin=${mpibin:-}
if [ -n "${NCCL_TESTS_MPI_BIN:-}" ] && [ -z "${NO_MPI:-}" ]; then
  mpibin=$NCCL_TESTS_MPI_BIN
  echo "== nccl-tests MPI builds: prebuilt, $(ls "$mpibin"/*_perf_mpi 2>/dev/null | wc -l) in $mpibin"
fi
if [ -n "$mpibin" ] && ! command -v mpirun >/dev/null; then
  mpibin=""
  echo "== no mpirun (set MPI_PREFIX to a staged Open MPI): the process mode uses weftrun"
fi
mpiflags="--allow-run-as-root --oversubscribe"   # Open MPI's; its -x passes the environment on
if [ -n "$mpibin" ] && ! mpirun --version 2>&1 | grep -q "Open MPI"; then
  mpibin=""
  echo "== mpirun is not Open MPI: the process mode uses weftrun"
fi

# One nccl-tests run: LIBNAME LIBDIR LABEL CMD...
run_perf() {
  local lib=$1 dir=$2 label=$3
  shift 3
  local log=$out/$label.log
  LD_LIBRARY_PATH=$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout "${RUN_TIMEOUT:-120}" "$@" >"$log" 2>&1
  local rc=$?
  local wrong
  wrong=$(awk '/^ +[0-9]+ +[0-9]+ / {for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+$/ && (i == 9 || i == 13)) s += $i} END {print s + 0}' "$log")
  if grep -q "Duplicate GPU" "$log" && [ "$lib" = nvidia ]; then
    say "$label" N/A "NVIDIA NCCL refuses ranks of one process on one GPU (Duplicate GPU)"
  elif [ $rc = 0 ] && grep -q "Out of bounds values : 0 OK" "$log" && [ "$wrong" = 0 ]; then
    say "$label" PASS "$(grep -m1 'Avg bus bandwidth' "$log" | tr -s ' ')"
  else
    say "$label" FAIL "rc=$rc: $(grep -v '^#' "$log" | grep -m1 -iE 'error|fail|warn|invalid|wrong' | cut -c1-160)"
  fi
}

# ---- 3. Collectives.
colls=${COLLS:-all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv}
args=(-b 8 -e "$maxbytes" -f 4 -g 1 -n "$iters" -w 1 -c 1)
libs="nvidia weft"
[ -n "${SKIP_NVIDIA:-}" ] && libs=weft
[ -n "${IPC_ONLY:-}" ] && libs=""
for lib in $libs; do
  if [ $lib = nvidia ]; then dir=$nvdir; else dir=$weftdir; fi
  for c in $colls; do
    for n in ${NRANKS:-2 4}; do
      if [ -z "$gpu" ]; then
        say "$lib-$c-t$n" SKIP "no GPU visible"
      elif [ -z "$bindir" ]; then
        say "$lib-$c-t$n" SKIP "no nccl-tests build"
      elif [ -z "$dir" ] || { [ $lib = weft ] && [ $weft_ok = 0 ]; }; then
        say "$lib-$c-t$n" SKIP "no $lib library"
      else
        run_perf $lib "$dir" "$lib-$c-t$n" "$bindir/${c}_perf" "${args[@]}" -t $n
      fi
      if [ -n "$mpibin" ] && [ -n "$dir" ] && [ -n "$gpu" ]; then
        # NCCL_TESTS_DEVICE=0: every process on GPU 0 (else process i takes GPU i).
        NCCL_TESTS_DEVICE=0 run_perf $lib "$dir" "$lib-$c-p$n" mpirun $mpiflags -np $n -x LD_LIBRARY_PATH \
          -x NCCL_SOCKET_IFNAME -x NCCL_TESTS_DEVICE \
          sh -c 'NCCL_HOSTID=gpu-check-${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}} exec "$0" "$@"' \
          "$mpibin/${c}_perf_mpi" "${args[@]}" -t 1
      elif [ $lib = weft ] && [ $weft_ok != 0 ] && [ -x build/bin/weftrun ]; then
        # No MPI: nccl-tests is then one process, so the process mode is
        # weft's own benchmark under weftrun: on the GPU with PERF_DEVICE=1
        # (--device 1: buffers from ncclMemAlloc, calls on CUDA streams),
        # else on host memory.
        if [ -n "${PERF_DEVICE:-}" ] && [ -n "$gpu" ]; then
          run_perf weft "$weftdir" "weft-$c-weftrun$n-gpu" build/bin/weftrun -n $n build/bin/${c}_perf --device 1 \
            -b 8 -e "$maxbytes" -f 4 -n "$iters" -w 1 -c 1 ${PERF_ARGS:-}
          # The same ranks as threads of one process, sharing the GPU's context.
          run_perf weft "$weftdir" "weft-$c-threads$n-gpu" build/bin/${c}_perf --device 1 -t $n \
            -b 8 -e "$maxbytes" -f 4 -n "$iters" -w 1 -c 1 ${PERF_ARGS:-}
        else
          run_perf weft "$weftdir" "weft-$c-weftrun$n" build/bin/weftrun -n $n build/bin/${c}_perf \
            -b 8 -e "$hostmax" -f 4 -n "$iters" -w 1 -c 1
        fi
      elif [ -z "$gpu" ]; then
        say "$lib-$c-p$n" SKIP "no GPU visible"
      elif [ -z "$mpibin" ]; then
        say "$lib-$c-p$n" SKIP "no mpirun with an MPI build of nccl-tests"
      else
        say "$lib-$c-p$n" SKIP "no $lib library"
      fi
    done
  done
done

# ---- 3a. test_cuda_stream on the real driver: the stand-in tests' bitwise
# sweeps against the host path, stream semantics, Send/Recv, split, abort,
# staging and IPC path, with libcuda.so.1 and libweft-cuda.so.
tcs=${TEST_CUDA_STREAM:-build/tests/multirank/test_cuda_stream}
if [ -n "${PERF_DEVICE:-}${IPC_ONLY:-}${TEST_CUDA_STREAM:-}" ]; then
  if [ -z "$gpu" ]; then
    say test-cuda-stream-real SKIP "no GPU visible"
  elif [ ! -x "$tcs" ]; then
    say test-cuda-stream-real SKIP "no $tcs (tests/gpu/gpu_pack.sh carries it)"
  else
    log=$out/test-cuda-stream-real.log
    WEFT_TEST_REAL_CUDA=1 LD_LIBRARY_PATH=$weftdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout 400 "$tcs" \
      --verbose >"$log" 2>&1
    rc=$?
    synth=$(grep -m1 "Synthesis" "$log" | sed 's/.*Synthesis: //')
    if [ $rc = 0 ] && grep -q "Failing: 0 | Crashing: 0" "$log"; then
      say test-cuda-stream-real PASS "$synth; skipped: $(grep -c '^\[SKIP\]' "$log")"
    else
      say test-cuda-stream-real FAIL "rc=$rc: ${synth:-no synthesis}: $(grep -m1 -E 'FAIL|check failed' "$log" | cut -c1-160)"
    fi
  fi
fi

# ---- 3b. The IPC path (WEFT_CUDA_IPC=1: collectives on the GPU through
# CUDA IPC and libweft-cuda.so's kernels, in rounds through device slots and
# mailboxes): every benchmark of COLLS as processes, 8 B to MAXBYTES, every
# type and op for all_reduce, and all_reduce as threads of one process.
if [ -n "${PERF_DEVICE:-}${IPC_ONLY:-}" ] && [ -n "$gpu" ] && [ $weft_ok != 0 ] && [ -x build/bin/weftrun ]; then
  for n in ${NRANKS:-2 4}; do
    for c in $colls; do
      WEFT_CUDA_IPC=1 run_perf weft "$weftdir" "weft-$c-ipc-weftrun$n-gpu" build/bin/weftrun -n $n \
        "build/bin/${c}_perf" --device 1 -b 8 -e "$maxbytes" -f 4 -n "$iters" -w 1 -c 1
    done
    WEFT_CUDA_IPC=1 run_perf weft "$weftdir" "weft-all_reduce-ipc-types-weftrun$n-gpu" build/bin/weftrun -n $n \
      build/bin/all_reduce_perf --device 1 -b 8 -e 4M -f 8 -n 2 -w 1 -c 1 -d all -o all
    WEFT_CUDA_IPC=1 run_perf weft "$weftdir" "weft-all_reduce-ipc-threads$n-gpu" build/bin/all_reduce_perf \
      --device 1 -t $n -b 8 -e "$maxbytes" -f 4 -n "$iters" -w 1 -c 1
  done
fi

# ---- 4. The device's copy bandwidth, beside all_reduce's busbw above.
[ -z "${SKIP_TORCH:-}" ] && timeout 60 "$py" - >"$out/copy-bw.log" 2>&1 <<'PY'
import torch
n = 1 << 30
d = torch.empty(n, dtype=torch.uint8, device="cuda"); d2 = torch.empty_like(d)
h = torch.empty(n, dtype=torch.uint8, pin_memory=True)
def bw(f):
    f(); torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = 0.0
    for _ in range(5):
        e0.record(); f(); e1.record(); torch.cuda.synchronize()
        best = max(best, n / (e0.elapsed_time(e1) / 1e3) / 1e9)
    return best
print("copy GB/s (1 GiB, best of 5): device-to-device %.0f (bytes copied; x2 for read+write), "
      "host-to-device %.1f, device-to-host %.1f" % (bw(lambda: d2.copy_(d)), bw(lambda: d.copy_(h, non_blocking=True)),
                                                   bw(lambda: h.copy_(d, non_blocking=True))))
PY
[ -z "${SKIP_TORCH:-}" ] && say copy-bandwidth "$([ $? = 0 ] && echo PASS || echo FAIL)" "$(tail -1 "$out/copy-bw.log")"

# ---- 5. PyTorch.
tc=tests/gpu/gpu_torch_check.py
if [ -n "${SKIP_TORCH:-}" ]; then
  say torch SKIP "SKIP_TORCH is set"
elif ! timeout 60 "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  say torch SKIP "no PyTorch with CUDA in $py"
else
  timeout 180 "$py" $tc --backend nccl --out "$out/torch-nvidia.json" >"$out/torch-nvidia.log" 2>&1
  say torch-nvidia "$([ $? = 0 ] && echo PASS || echo FAIL)" "$(tail -1 "$out/torch-nvidia.log")"
  # weft through staging, and (PERF_DEVICE or IPC_ONLY) on the IPC path.
  modes=""
  [ -z "${IPC_ONLY:-}" ] && modes="weft"
  [ -n "${PERF_DEVICE:-}${IPC_ONLY:-}" ] && modes="$modes weft-ipc"
  for m in $modes; do
    if [ $weft_ok = 0 ]; then
      say "torch-$m" SKIP "weft did not build"
      continue
    fi
    WEFT_CUDA_IPC=$([ $m = weft-ipc ] && echo 1 || echo 0) LD_PRELOAD=$weftdir/libnccl.so.2 timeout 180 \
      "$py" $tc --backend nccl --out "$out/torch-$m.json" >"$out/torch-$m.log" 2>&1
    say "torch-$m" "$([ $? = 0 ] && echo PASS || echo FAIL)" "$(tail -1 "$out/torch-$m.log")"
    if [ -f "$out/torch-nvidia.json" ] && [ -f "$out/torch-$m.json" ]; then
      "$py" $tc --compare "$out/torch-nvidia.json" "$out/torch-$m.json" >"$out/torch-compare-$m.log" 2>&1
      say "torch-compare-$m" "$([ $? = 0 ] && echo PASS || echo FAIL)" "$(tail -1 "$out/torch-compare-$m.log")"
    fi
  done
fi

echo "gpu-check: $npass passed, $nfail failed, $nskip skipped, $nna n/a in $(($(date +%s) - t0)) s (logs: $out)"
[ $nfail = 0 ]
