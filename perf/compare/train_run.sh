#!/usr/bin/env bash
# train_run.sh — weft-train against PyTorch on the CPU: tokens/s side by side.
#
# Trains weft-train's default model (one rank) and the same model and step in
# PyTorch (perf/compare/train_torch.py, random tokens of the same vocabulary)
# REPS times each, interleaved (weft, torch, weft, torch, ...) so drift on a
# shared, noisy machine hits both sides alike, at 1 and at 2 threads (OpenBLAS
# threads for weft; intra-op threads for torch). Prints the median tokens/s
# per side and the ratio weft/torch. weft's figure is its final line (tokens
# over training time, every step); torch's is the median step after warm-up,
# with its every-step mean beside it for a like-for-like reading.
#
#   perf/compare/train_run.sh [-r REPS] [-s STEPS] [-t "1 2"]
set -u -o pipefail

reps=3 steps=300 threads="1 2"
while [ $# -gt 0 ]; do
  case "$1" in
    -r) reps=$2; shift 2 ;;
    -s) steps=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "train_run.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
weft=build/bin/weft-train
py=/usr/bin/python3   # the Debian python3-torch
make -j2 "$weft" >/dev/null || { echo "train_run.sh: build failed" >&2; exit 1; }
"$py" -c 'import torch' 2>/dev/null || { echo "train_run.sh: $py has no torch (python3-torch)" >&2; exit 1; }

median() { sort -g | awk '{v[NR]=$1} END {if (NR == 0) print "nan"; else if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

declare -A W T TA
for th in $threads; do
  for ((r = 1; r <= reps; r++)); do
    # eval-every 0 and a single eval batch: the final evaluation is outside
    # weft's training time anyway, this only keeps the run short.
    w=$(OPENBLAS_NUM_THREADS=$th OMP_NUM_THREADS=$th timeout 300 "$weft" --steps "$steps" --eval-every 0 \
          --eval-batches 1 --eval-problems 0 --print-every "$steps" 2>&1 |
        sed -n 's/^final:.* \([0-9.]*\) tokens\/s$/\1/p')
    t=$(timeout 300 "$py" perf/compare/train_torch.py --threads "$th" --steps "$steps" 2>&1 |
        sed -n 's/^torch:.* median \([0-9.]*\) tokens\/s mean-all \([0-9.]*\) tokens\/s$/\1 \2/p')
    echo "threads $th rep $r: weft ${w:-failed} tokens/s, torch median/mean-all ${t:-failed}" >&2
    W[$th]+="${w:-} " T[$th]+="${t%% *} " TA[$th]+="${t##* } "
  done
done

echo
echo "weft-train vs PyTorch $("$py" -c 'import torch; print(torch.__version__)'), 1 rank, default model, $steps steps, median of $reps"
printf '| threads | weft tokens/s | torch tokens/s (median step) | weft/torch | torch tokens/s (every step) | weft/torch |\n'
printf '|---|---|---|---|---|---|\n'
for th in $threads; do
  w=$(tr ' ' '\n' <<<"${W[$th]}" | grep . | median)
  t=$(tr ' ' '\n' <<<"${T[$th]}" | grep . | median)
  ta=$(tr ' ' '\n' <<<"${TA[$th]}" | grep . | median)
  awk -v th="$th" -v w="$w" -v t="$t" -v ta="$ta" 'BEGIN {
    printf "| %s | %.0f | %.0f | %.2f | %.0f | %.2f |\n", th, w, t, (t > 0 ? w / t : 0), ta, (ta > 0 ? w / ta : 0) }'
done
