#!/usr/bin/env bash
# run.sh FUZZ_BUILD [TARGET...] — runs each fuzz target for FUZZ_SECONDS
# (default 60), FUZZ_JOBS targets at a time (default: one per CPU), each in
# one process (no -jobs/-fork: those spawn workers and write fuzz-N.log
# here), and ends with the line CI reads: "fuzz: N passed, M failed".
#
# Seeds come from tests/fuzz/corpus/<target>/ (plus tests/topologies/ for the
# topology target); what the fuzzer finds goes to FUZZ_BUILD/corpus/<target>/
# and a crashing input to FUZZ_BUILD/artifacts/. Any crash, sanitizer report,
# leak, per-input timeout or memory blow-up fails the target. A hard timeout
# around each run (KILL) means nothing outlives the script.
set -u
build=${1:-build-fuzz}
shift || true
seconds=${FUZZ_SECONDS:-60}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for b in "$build"/fuzz_*; do
    [ -x "$b" ] && [ "${b%.d}" = "$b" ] && targets+=("$(basename "$b")")
  done
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$here/lsan.supp:print_suppressions=0}

jobs=${FUZZ_JOBS:-$(nproc)}
mkdir -p "$build/artifacts" "$build/logs"

run_target() {  # TARGET: fuzz it; its report line goes to logs/NAME.result
  local t=$1 name=${1#fuzz_} max_len=4096 start=$SECONDS
  local seeds=("$here/corpus/$name")
  case $name in
    topo) seeds+=("$root/tests/topologies"); max_len=32768 ;;
    env) max_len=2048 ;;
    unique_id) max_len=640 ;;
  esac
  mkdir -p "$build/corpus/$name"
  local log=$build/logs/$name.log result=$build/logs/$name.result
  timeout --signal=KILL $((seconds + 120)) "$build/$t" -max_total_time="$seconds" -rss_limit_mb=2048 \
    -timeout=10 -max_len=$max_len -print_final_stats=1 \
    -artifact_prefix="$build/artifacts/$name-" "$build/corpus/$name" "${seeds[@]}" >"$log" 2>&1
  local rc=$?
  local runs rate
  runs=$(grep -a 'stat::number_of_executed_units' "$log" | tail -1 | awk '{print $2}')
  rate=$(grep -a 'stat::average_exec_per_sec' "$log" | tail -1 | awk '{print $2}')
  if [ $rc -eq 0 ]; then
    echo "fuzz $name: ok, ${runs:-?} inputs in $((SECONDS - start)) s (${rate:-?}/s)" >"$result"
  else
    { echo "fuzz $name: FAILED (exit $rc) after $((SECONDS - start)) s; log $log"
      grep -a -m5 -E 'ERROR: |SUMMARY: |Test unit written|runtime error' "$log" | sed 's/^/  /'; } >"$result"
  fi
}

for t in "${targets[@]}"; do
  rm -f "$build/logs/${t#fuzz_}.result"
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  run_target "$t" &
done
wait

passed=0
failed=0
for t in "${targets[@]}"; do
  result=$build/logs/${t#fuzz_}.result
  if [ -f "$result" ] && grep -q ': ok,' "$result"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  cat "$result" 2>/dev/null || echo "fuzz ${t#fuzz_}: FAILED (no result)"
done
echo "fuzz: $passed passed, $failed failed"
[ $failed -eq 0 ]
