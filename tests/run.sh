#!/usr/bin/env bash
# run.sh BUILD_DIR — runs every test binary and script, each under a
# timeout, and ends with the line CI reads: "N passed, M failed".
#
# Criterion binaries report "Synthesis: Tested: T | Passing: P | Failing: F |
# Crashing: C"; their counts are added up. A binary that times out, dies, or
# prints no synthesis counts as one failure. Multi-rank tests run one test
# at a time (-j1): each already forks up to 8 ranks onto 2 cores. The
# multi-host suite needs root and ip netns; without them it prints
# "skipped" and why, and counts neither as passed nor as failed. Every
# limit is multiplied by WEFT_TEST_TIME_SCALE (default 1; make test-asan
# sets 3, the sanitizers' slowdown on the reference machine).
set -u
build=${1:-build}
scale=${WEFT_TEST_TIME_SCALE:-1}
export WEFT_BUILD_DIR=$build
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
# Multi-host tests (tests/multihost/): "shm" gives every namespace "host" one
# WEFT_HOSTID, so ranks share memory and only bootstrap crosses the links;
# "net" gives each host its own, so the network transport carries the data.
export WEFT_MULTIHOST_MODE=${WEFT_MULTIHOST_MODE:-net}
passed=0
failed=0
failures=()
logdir=$build/test-logs
mkdir -p "$logdir"

shm_before=$(ls /dev/shm 2>/dev/null | grep -c '^weft-' || true)

run_criterion() {  # name timeout binary args...
  local name=$1 limit=$(($2 * scale))
  shift 2
  local log=$logdir/$(tr '/ ' '__' <<<"$name").log start=$SECONDS
  timeout --signal=KILL "$limit" "$@" >"$log" 2>&1
  local rc=$?
  local line
  line=$(grep -a 'Synthesis:' "$log" | tail -1)
  if [ -n "$line" ]; then
    local t p f c
    t=$(sed -E 's/.*Tested: ([0-9]+).*/\1/' <<<"$line")
    p=$(sed -E 's/.*Passing: ([0-9]+).*/\1/' <<<"$line")
    f=$(sed -E 's/.*Failing: ([0-9]+).*/\1/' <<<"$line")
    c=$(sed -E 's/.*Crashing: ([0-9]+).*/\1/' <<<"$line")
    passed=$((passed + p))
    failed=$((failed + f + c + (t - p - f - c > 0 ? t - p - f - c : 0)))
    [ $((f + c)) -gt 0 ] && failures+=("$name")
    printf '%-34s %3d/%-3d passed  (%ds)\n' "$name" "$p" "$t" $((SECONDS - start))
    # What failed, in the output CI keeps (the log stays on the machine).
    [ $((f + c)) -gt 0 ] && grep -a -E '\[FAIL\]|check failed|\[----\].*(Assertion|:[0-9]+:)|CRASH' "$log" | head -16 | sed 's/^/    /'
  else
    failed=$((failed + 1))
    failures+=("$name")
    printf '%-34s FAILED (exit %d, no summary; see %s)\n' "$name" "$rc" "$log"
  fi
}

run_script() {  # name timeout command...
  local name=$1 limit=$(($2 * scale))
  shift 2
  local log=$logdir/$(tr '/ ' '__' <<<"$name").log start=$SECONDS
  if timeout --signal=KILL "$limit" "$@" >"$log" 2>&1; then
    passed=$((passed + 1))
    printf '%-34s passed  (%ds)\n' "$name" $((SECONDS - start))
  else
    failed=$((failed + 1))
    failures+=("$name")
    printf '%-34s FAILED (see %s)\n' "$name" "$log"
    tail -5 "$log" | sed 's/^/    /'
  fi
}

for t in "$build"/tests/unit/test_*; do
  [ -x "$t" ] || continue
  run_criterion "unit/$(basename "$t")" 300 "$t" --jobs 2
done
for t in "$build"/tests/multirank/test_*; do
  [ -x "$t" ] || continue
  if [ "$(basename "$t")" = test_conformance ]; then
    # The sweep's three ways of hosting ranks, each under its own limit.
    for way in fork threads group; do
      run_criterion "multirank/test_conformance/$way" 600 "$t" --jobs 1 --filter "conformance_$way/*"
    done
    continue
  fi
  run_criterion "multirank/$(basename "$t")" 600 "$t" --jobs 1
done
# RAS: NCCL's client protocol against a 4-rank job (stopped and killed ranks, MONITOR).
run_script "multirank/ras (4 ranks)" 120 ./tests/multirank/test_ras.sh "$build"
run_script "abi" 300 ./tests/abi/run_abi.sh "$build"
# Every folder's include rule and the one-way layers (scripts/check-includes.py).
run_script "check-includes" 120 python3 scripts/check-includes.py --objects "$build/obj"
run_script "docs/env.md current" 60 bash -c "'$build/bin/weft-env' --markdown | diff -u docs/env.md -"
run_script "demo (4 ranks)" 120 "$build/bin/weftrun" -n 4 "$build/bin/weft-demo"
# The GPU machine's PyTorch check (tests/gpu/gpu_torch_check.py), its logic on
# CPU with gloo: Debian's python3-torch, loopback only.
if /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
  run_script "gpu/torch check (gloo, cpu)" 120 /usr/bin/python3 tests/gpu/gpu_torch_check.py --backend gloo --device cpu \
    --large 65536 --timeout 60
else
  printf '%-34s skipped (no torch in /usr/bin/python3)\n' "gpu/torch check (gloo, cpu)"
fi
# The torch.distributed backend "weft" (torch/, make torch) against Gloo.
if [ -f "$build/python/weft_torch/_C.so" ] && /usr/bin/python3 -c 'import torch, pytest' >/dev/null 2>&1; then
  run_script "torch/backend weft (pytest)" 600 env PYTHONPATH="$build/python:tests/torch" \
    /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/torch
else
  printf '%-34s skipped (%s)\n' "torch/backend weft (pytest)" "no $build/python/weft_torch or no torch and pytest"
fi
tune_out=$(mktemp /tmp/weft-tune-XXXXXX)
run_script "calibrate (2 ranks)" 120 bash -c "'$build/bin/weftrun' -n 2 '$build/bin/weft-calibrate' -n 20 -o '$tune_out' &&
  awk '\$1 == \"intra\" && \$2 > 0 && \$3 > 0 { ok = 1 } END { exit !ok }' '$tune_out'"
rm -f "$tune_out"
run_script "multihost/launch ($WEFT_MULTIHOST_MODE)" 120 ./tests/multihost/test_launch.sh "$build"
if why=$(./tests/multihost/netns.sh --check); then
  run_script "multihost/netns ($WEFT_MULTIHOST_MODE)" 240 ./tests/multihost/run_tests.sh "$build"
  run_script "multihost/ras (2x2, partition)" 120 ./tests/multihost/test_ras.sh "$build"
  ./tests/multihost/netns.sh --clean-stale  # what a run killed at its limit left
else
  printf '%-34s skipped (%s)\n' "multihost/netns" "$why"
fi
# Each rank's traffic through its NUMA node's NIC, two NICs per host as rails.
if why=$(./tests/multihost/netns.sh --check --rails 2); then
  run_script "multihost/nic rails" 120 ./tests/multihost/test_nic_rails.sh "$build"
else
  printf '%-34s skipped (%s)\n' "multihost/nic rails" "$why"
fi

# GPU tests (tests/gpu/, built only where nvcc is): a plain program each;
# exit 77 means no CUDA device was visible: "skipped", counted neither way.
for t in "$build"/tests/gpu/test_*; do
  [ -x "$t" ] || continue
  name="gpu/$(basename "$t")"
  log=$logdir/$(tr '/ ' '__' <<<"$name").log
  start=$SECONDS
  timeout --signal=KILL 600 "$t" >"$log" 2>&1
  rc=$?
  if [ "$rc" -eq 77 ]; then
    printf '%-34s skipped (%s)\n' "$name" "$(grep -a '^skipped' "$log" | tail -1 | sed 's/^skipped: //')"
  elif [ "$rc" -eq 0 ]; then
    passed=$((passed + 1))
    printf '%-34s passed  (%ds)\n' "$name" $((SECONDS - start))
  else
    failed=$((failed + 1))
    failures+=("$name")
    printf '%-34s FAILED (exit %d; see %s)\n' "$name" "$rc" "$log"
    tail -5 "$log" | sed 's/^/    /'
  fi
done

shm_after=$(ls /dev/shm 2>/dev/null | grep -c '^weft-' || true)
if [ "$shm_after" -gt "$shm_before" ]; then
  failed=$((failed + 1))
  failures+=("leftover /dev/shm segments")
  echo "leftover shared memory: $(ls /dev/shm | grep '^weft-' | tr '\n' ' ')"
else
  passed=$((passed + 1))
  echo "no shared-memory segments left behind"
fi

[ ${#failures[@]} -gt 0 ] && echo "failed: ${failures[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
