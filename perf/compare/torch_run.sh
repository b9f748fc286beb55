#!/usr/bin/env bash
# torch_run.sh — the torch.distributed backend "weft" against "gloo", both
# through torch.distributed on this host, 2 ranks.
#
#   perf/compare/torch_run.sh [-r REPS] [-T SECONDS] [-B BUILD] [-o DIR]
#
# Each repetition runs, interleaved (the backends' order alternates from one
# repetition to the next):
#   - torch_bench.py for all_reduce, all_gather, reduce_scatter, broadcast
#     and all_to_all_single, 4 KiB to 256 MiB (x4), each size timed for about
#     SECONDS (default 0.5) after 5 warm-up calls, on "weft" and "gloo";
#   - a DDP training step of torch_bench.py's small transformer (3.7 M
#     parameters, 14.7 MB of gradients) with 1 and 4 sequences of 64 tokens
#     per rank, median of 20 steps after 3, and the same steps under DDP's
#     no_sync() (no gradient all_reduce): the compute alone, the bound;
#   - a tensor-parallel step (torch_bench.py -c tp: one transformer block of
#     width 256 split over both ranks with DTensor) on 64 and 256 tokens,
#     median of 20 steps after 3, on "weft" and "gloo"; torch 2.x only, skipped
#     on a torch without DeviceMesh (1.13);
#   - weft's own all_reduce_perf in C (two processes, blocking calls on the
#     NULL stream, -z 2), whose in-place time is what a call costs weft
#     without Python and torch: the difference is the Python-side overhead.
# The torch backends have no CPU pinning of their own (torch.distributed
# leaves placement to the launcher), so no series is pinned. torch 1.13 on
# Debian has no MPI backend (torch.distributed.is_mpi_available() is False).
# weft (libweft, weftrun, all_reduce_perf, weft_torch) comes from BUILD
# (default build; brought up to date from this tree first): `make torch2-compare` runs this
# in the Debian 13 root (torch 2.6) with BUILD build-debian13.
# Logs go to DIR/logs (default build/compare/torch-VERSION, VERSION torch's
# without its local part: 1.13.0a0, 2.6.0); torch_report.py then writes
# DIR/results.md (medians over repetitions) and DIR/allreduce.png.
# Needs /usr/bin/python3's torch (Debian's python3-torch).
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 1
REPS=3 BUDGET=0.5 BUILD=build OUT=
while [ $# -gt 0 ]; do
  case "$1" in
    -r) REPS=${2:?}; shift 2 ;;
    -T) BUDGET=${2:?}; shift 2 ;;
    -B) BUILD=${2:?}; shift 2 ;;
    -o) OUT=${2:?}; shift 2 ;;
    *) echo "usage: perf/compare/torch_run.sh [-r REPS] [-T SECONDS] [-B BUILD] [-o DIR]" >&2; exit 2 ;;
  esac
done
PY=/usr/bin/python3
TORCH_VERSION=$("$PY" -c 'import torch; print(torch.__version__.split("+")[0])') || exit 1
OUT=${OUT:-build/compare/torch-$TORCH_VERSION}
# Built (or brought up to date) from this tree, so the figures are this tree's.
make -j2 BUILD="$BUILD" all torch >/dev/null || exit 1
HAVE_TP=1
"$PY" -c 'import torch.distributed.device_mesh, torch.distributed.tensor.parallel' 2>/dev/null || HAVE_TP=
rm -rf "$OUT/logs"
mkdir -p "$OUT/logs"
# torch_bench.py takes weft_torch from WEFT_BUILD_DIR/python.
case $BUILD in /*) WEFT_BUILD_DIR=$BUILD ;; *) WEFT_BUILD_DIR=$ROOT/$BUILD ;; esac
export WEFT_BUILD_DIR NCCL_SOCKET_IFNAME=lo OMP_NUM_THREADS=1
# commit_of_tree: HEAD's commit, read from .git when git is not installed
# (the Debian 13 root has none).
commit_of_tree() {
  local ref
  git rev-parse --short HEAD 2>/dev/null && return
  ref=$(sed -n 's/^ref: //p' .git/HEAD 2>/dev/null)
  if [ -z "$ref" ]; then cut -c1-7 .git/HEAD 2>/dev/null || echo unknown
  elif [ -f ".git/$ref" ]; then cut -c1-7 ".git/$ref"
  else awk -v r="$ref" '$2 == r {print substr($1, 1, 7)}' .git/packed-refs 2>/dev/null; fi
}
COLLS="allreduce allgather reducescatter broadcast alltoall"
# weft's C benchmark: iterations per size band, "first last iterations warm-up".
C_BANDS="4K 64K 2000 200
256K 1M 500 50
4M 16M 50 5
64M 256M 10 2"

{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "machine: $(getconf _NPROCESSORS_ONLN) CPUs, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r)"
  echo "torch: $($PY -c 'import torch; print(torch.__version__)')"
  echo "weft: $(commit_of_tree) (built in $BUILD)"
  echo "repetitions: $REPS, interleaved; time budget per size: $BUDGET s"
  [ -n "$HAVE_TP" ] || echo "tensor parallel: skipped (this torch has no DeviceMesh)"
} >"$OUT/meta.txt"
cat "$OUT/meta.txt"

for ((rep = 1; rep <= REPS; rep++)); do
  if ((rep % 2)); then order="weft gloo"; else order="gloo weft"; fi
  for coll in $COLLS; do
    for b in $order; do
      log="$OUT/logs/${b}_${coll}_r${rep}.log"
      timeout -k 10 900 "$PY" perf/compare/torch_bench.py --backend "$b" -np 2 -c "$coll" \
        -b 4K -e 256M -f 4 -T "$BUDGET" -w 5 >"$log" 2>&1 || echo "rep $rep $b $coll: exit $? (see $log)"
      echo "rep $rep $b $coll: $(grep -c ^RESULT "$log") sizes"
    done
  done
  for batch in 1 4; do
    for b in $order; do
      log="$OUT/logs/${b}_ddp${batch}_r${rep}.log"
      timeout -k 10 900 "$PY" perf/compare/torch_bench.py --backend "$b" -np 2 -c ddp --ddp-batch "$batch" \
        -n 20 -w 3 >"$log" 2>&1 || echo "rep $rep $b ddp: exit $? (see $log)"
      echo "rep $rep $b ddp batch $batch: $(awk '/^RESULT/{print $7}' "$log")"
    done
    log="$OUT/logs/nosync_ddp${batch}_r${rep}.log"
    timeout -k 10 900 "$PY" perf/compare/torch_bench.py --backend weft -np 2 -c ddp --ddp-batch "$batch" \
      --ddp-no-sync -n 20 -w 3 >"$log" 2>&1 || echo "rep $rep ddp no_sync: exit $? (see $log)"
    echo "rep $rep ddp batch $batch without gradient all_reduce: $(awk '/^RESULT/{print $7}' "$log")"
  done
  for tokens in 64 256; do
    [ -n "$HAVE_TP" ] || break
    for b in $order; do
      log="$OUT/logs/${b}_tp${tokens}_r${rep}.log"
      timeout -k 10 900 "$PY" perf/compare/torch_bench.py --backend "$b" -np 2 -c tp --tp-tokens "$tokens" \
        -n 20 -w 3 >"$log" 2>&1 || echo "rep $rep $b tp: exit $? (see $log)"
      echo "rep $rep $b tp $tokens tokens: $(awk '/^RESULT/{print $7}' "$log")"
    done
  done
  log="$OUT/logs/weftc_allreduce_r${rep}.log"
  : >"$log"
  while read -r first last n w; do
    timeout -k 10 600 "$BUILD/bin/weftrun" -n 2 -t 600 "$BUILD/bin/all_reduce_perf" -b "$first" -e "$last" -f 4 \
      -n "$n" -w "$w" -z 2 >>"$log" 2>&1 || echo "rep $rep weft C $first-$last: exit $? (see $log)"
  done <<<"$C_BANDS"
  echo "rep $rep weft C allreduce: $(grep -cE '^ +[0-9]' "$log") sizes"
done
"$PY" perf/compare/torch_report.py "$OUT"
