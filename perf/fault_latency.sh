#!/usr/bin/env bash
# fault_latency.sh — how long survivors take to fail after a rank dies.
#
#   perf/fault_latency.sh [-n TRIALS] [-r RANKS]
#
# Runs tests/multirank/test_faults' kill -9 case at RANKS ranks (2, 4 or 8;
# default 8) TRIALS times (default 20): a rank sends itself SIGKILL while
# the others are inside AllReduce on shared memory, and each trial logs the
# slowest survivor's time from the kill to its error. Prints every trial,
# then the median and the maximum. Build first (make test builds the test).
set -u
trials=20 ranks=8
while [ $# -gt 0 ]; do
  case "$1" in
    -n) trials=${2:?}; shift 2 ;;
    -r) ranks=${2:?}; shift 2 ;;
    *) echo "usage: perf/fault_latency.sh [-n TRIALS] [-r 2|4|8]" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.." || exit 1
bin=build/tests/multirank/test_faults
[ -x "$bin" ] || { echo "fault_latency: $bin is missing: run make test first" >&2; exit 1; }
export NCCL_SOCKET_IFNAME=lo
for ((i = 1; i <= trials; i++)); do
  "$bin" --filter "faults/kill9_mid_allreduce_${ranks}_ranks" --verbose 2>&1 |
    grep -o 'survivors failed within [0-9.]* s' | awk -v i="$i" '{print "trial", i, $4}'
done | tee /tmp/weft-fault-latency.$$ 
sort -n -k3 /tmp/weft-fault-latency.$$ | awk -v ranks="$ranks" '{v[NR] = $3} END {
  if (NR == 0) { print "no trials completed"; exit 1 }
  med = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
  printf "%d trials at %d ranks: median %.3f s, max %.3f s\n", NR, ranks, med, v[NR] }'
rm -f /tmp/weft-fault-latency.$$
