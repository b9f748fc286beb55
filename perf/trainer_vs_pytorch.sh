#!/usr/bin/env bash
# trainer_vs_pytorch.sh — weft-train against PyTorch on the CPU, one run,
# side by side: tokens/s of the identical model and step.
#
# For each model (the default one, and with -m a larger one too) it trains
# weft-train (one rank) and the same GPT in PyTorch (perf/compare/
# train_torch.py: same sizes, batch, sequence, AdamW, clipping, schedule;
# Debian's python3-torch) REPS times each, interleaved (weft, torch, weft,
# torch, ...) so drift on a shared, noisy machine hits both alike, at 1 and
# at 2 threads (OpenBLAS threads for weft; intra-op threads for torch). Then
# weft's data-parallel scaling: DP2 under weftrun with one thread per rank,
# interleaved with weft's own one-rank, one-thread run.
#
# Both sides' figure is tokens over the training time of every step
# (weft-train's final line; train_torch.py's "mean-all"); torch's median
# step after warm-up is printed beside it.
#
#   perf/trainer_vs_pytorch.sh [-r REPS] [-s STEPS] [-t "1 2"] [-m "FLAGS"]
#   -m "--layers 4 --hidden 128 --heads 4 --ffn 512 --seq 64"  adds a model
set -u -o pipefail

reps=3 steps=300 threads="1 2" extra=""
while [ $# -gt 0 ]; do
  case "$1" in
    -r) reps=$2; shift 2 ;;
    -s) steps=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    -m) extra=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "trainer_vs_pytorch.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
weft=build/bin/weft-train
py=/usr/bin/python3   # the Debian python3-torch
make -j2 "$weft" build/bin/weftrun >/dev/null || { echo "trainer_vs_pytorch.sh: build failed" >&2; exit 1; }
"$py" -c 'import torch' 2>/dev/null || { echo "trainer_vs_pytorch.sh: $py has no torch (python3-torch)" >&2; exit 1; }

median() { sort -g | awk '{v[NR]=$1} END {if (NR == 0) print "nan"; else if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
col() { tr ' ' '\n' <<<"$1" | grep . | median; }
# weft-train's flags for a model; train_torch.py takes the same names.
common="--steps $steps --eval-every 0 --eval-batches 1 --eval-problems 0 --print-every $steps"
weft_tps() {  # threads ranks flags... -> tokens/s from the final line
  local th=$1 n=$2; shift 2
  local launch=()
  [ "$n" -gt 1 ] && launch=(env NCCL_SOCKET_IFNAME=lo build/bin/weftrun -n "$n")
  OPENBLAS_NUM_THREADS=$th OMP_NUM_THREADS=$th timeout 600 "${launch[@]}" "$weft" $common "$@" 2>&1 |
    sed -n 's/^final:.* \([0-9.]*\) tokens\/s$/\1/p' | head -1
}
torch_tps() {  # threads flags... -> "median mean-all"
  local th=$1; shift
  timeout 600 "$py" perf/compare/train_torch.py --threads "$th" --steps "$steps" "$@" 2>&1 |
    sed -n 's/^torch:.* median \([0-9.]*\) tokens\/s mean-all \([0-9.]*\) tokens\/s$/\1 \2/p'
}

models=("")
[ -n "$extra" ] && models+=("$extra")
tv=$("$py" -c 'import torch; print(torch.__version__)')
for m in "${models[@]}"; do
  declare -A W=() T=() TA=()
  for th in $threads; do
    for ((r = 1; r <= reps; r++)); do
      w=$(weft_tps "$th" 1 $m)
      t=$(torch_tps "$th" $m)
      echo "model '${m:-default}' threads $th rep $r: weft ${w:-failed}, torch median/mean-all ${t:-failed} tokens/s" >&2
      W[$th]+="${w:-} " T[$th]+="${t%% *} " TA[$th]+="${t##* } "
    done
  done
  echo
  echo "weft-train vs PyTorch $tv, 1 rank, model '${m:-default}', $steps steps, median of $reps"
  echo "| threads | weft tokens/s | torch tokens/s | weft/torch | torch median step (tokens/s) |"
  echo "|---|---|---|---|---|"
  for th in $threads; do
    awk -v th="$th" -v w="$(col "${W[$th]}")" -v ta="$(col "${TA[$th]}")" -v t="$(col "${T[$th]}")" 'BEGIN {
      printf "| %s | %.0f | %.0f | %.2f | %.0f |\n", th, w, ta, (ta > 0 ? w / ta : 0), t }'
  done
done

# Data-parallel scaling on this machine: DP2, one thread per rank, against
# one rank with one thread; the same per-rank batch, so DP2 moves twice the
# tokens per step.
one="" two=""
for ((r = 1; r <= reps; r++)); do
  a=$(weft_tps 1 1) b=$(weft_tps 1 2 --dp 2)
  echo "scaling rep $r: 1 rank ${a:-failed}, DP2 ${b:-failed} tokens/s" >&2
  one+="${a:-} " two+="${b:-} "
done
echo
echo "weft-train data-parallel scaling, default model, 1 thread per rank, median of $reps"
awk -v a="$(col "$one")" -v b="$(col "$two")" 'BEGIN {
  printf "| 1 rank | DP2 (2 ranks) | DP2 / 1 rank |\n|---|---|---|\n| %.0f | %.0f | %.2f |\n", a, b, (a > 0 ? b / a : 0) }'
