#!/usr/bin/env bash
# net_run.sh — weft's network transport against iperf3 and Open MPI over TCP.
#
#   perf/compare/net_run.sh [-r REPS] [-o OUTFILE]
#
# 1. Two network namespaces joined by veth links and a bridge
#    (tests/multihost/netns.sh), one rank in each, every host its own
#    WEFT_HOSTID: iperf3 one stream and --bidir between them, then weft's
#    all_reduce_perf (-z 2, 8 B .. 256 MiB) with 1, 2 and 4 sockets per
#    connection (NCCL_NSOCKS_PERTHREAD) and with the messages above 8 KiB
#    left to the proxy thread (WEFT_NET_INLINE=8192), then Open MPI's MPI_Allreduce over
#    its TCP BTL between the same two namespaces (mpirun in the first, its
#    daemon started in the second by netns_agent.sh in place of ssh), each
#    size for 3000 (small) down to 8 (256 MiB) iterations after a tenth as
#    many untimed ones, enough for both to reach their steady state. The
#    two "hosts" share this machine's cores, so neither library is pinned
#    (each would bind its one rank per host to core 0).
# 2. Four namespaces x 2 ranks joined by 2 ms links (netns.sh --wire-delay,
#    delay_hub: this kernel has no netem): weft-calibrate measures the
#    links, then 8-byte all_reduce with the tuner's choice and with the
#    ring (NCCL_ALGO=allreduce:ring).
# REPS repetitions (default 3), interleaved; raw lines go to OUTFILE
# (default build/compare/net.txt). Needs root, ip netns, iperf3, Open MPI
# (installs iperf3 and openmpi-bin/libopenmpi-dev when missing).
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 1
REPS=3 OUTF=build/compare/net.txt
while [ $# -gt 0 ]; do
  case "$1" in
    -r) REPS=${2:?}; shift 2 ;;
    -o) OUTF=${2:?}; shift 2 ;;
    *) echo "usage: perf/compare/net_run.sh [-r REPS] [-o OUTFILE]" >&2; exit 2 ;;
  esac
done
mkdir -p "$(dirname "$OUTF")" build/compare
for p in iperf3 mpirun.openmpi; do
  command -v "$p" >/dev/null || apt-get install -y iperf3 openmpi-bin libopenmpi-dev >/dev/null
done
[ -x build/bin/all_reduce_perf ] && [ -x build/tests/multihost/delay_hub ] ||
  make -j2 all build/tests/multihost/delay_hub >/dev/null
mpicc.openmpi -std=c11 -O2 -D_GNU_SOURCE -Itools/common -o build/compare/mpi_coll_bench.openmpi \
  perf/compare/mpi_coll_bench.c tools/common/prog_util.c || exit 1
export REPS
inner=$(mktemp /tmp/weft-net-XXXXXX.sh)
cat >"$inner" <<'IN'
#!/usr/bin/env bash
read -r h0 h1 _ <<<"$WEFT_MH_HOSTS"
read -r a0 a1 _ <<<"$WEFT_MH_ADDRS"
# Iterations per size band, so every size runs long enough for both
# libraries to reach their steady state: first last iterations warm-up.
BANDS="8 16K 3000 300
64K 256K 2000 200
1M 4M 200 20
16M 64M 20 3
256M 256M 8 2"
weft() {  # ENV... -- all_reduce_perf over the two hosts, every band: "size time_us busbw"
  while read -r b e n w; do
    env "$@" tests/multihost/run_job.sh -l 2x1 -m net build/bin/all_reduce_perf \
      -b "$b" -e "$e" -f 4 -z 2 -n "$n" -w "$w" -a 3 </dev/null 2>&1 | awk '/^ +[0-9]/{print "  ", $1, $6, $8}'
  done <<<"$BANDS"
}
ompi() {
  while read -r b e n w; do
    ip netns exec "$h0" mpirun.openmpi --allow-run-as-root -np 2 --host "$a0,$a1" --map-by node --bind-to none \
      --mca plm_rsh_agent "$PWD/perf/compare/netns_agent.sh" --mca pml ob1 --mca btl tcp,self \
      --mca btl_tcp_if_include wv0 --mca oob_tcp_if_include wv0 build/compare/mpi_coll_bench.openmpi \
      -c allreduce -b "$b" -e "$e" -f 4 -n "$n" -w "$w" </dev/null 2>&1 |
      awk '/RESULT/{for (i = 1; i <= NF; i++) {split($i, kv, "="); v[kv[1]] = kv[2]}; print "  ", v["size"], v["time_us"], v["busbw"]}'
  done <<<"$BANDS"
}
for rep in $(seq 1 "$REPS"); do
  ip netns exec "$h0" iperf3 -s -1 -D -B "$a0" >/dev/null 2>&1; sleep 0.5
  echo "iperf3 rep $rep: $(ip netns exec "$h1" iperf3 -c "$a0" -t 3 -f g 2>&1 | grep receiver)"
  ip netns exec "$h0" iperf3 -s -1 -D -B "$a0" >/dev/null 2>&1; sleep 0.5
  echo "iperf3 bidir rep $rep: $(ip netns exec "$h1" iperf3 -c "$a0" -t 3 -f g --bidir 2>&1 | grep receiver | tr '\n' ' ')"
  for ns in 1 2 4; do
    echo "weft nsocks=$ns rep $rep (size time_us busbw_GBps)"
    weft NCCL_NSOCKS_PERTHREAD=$ns
  done
  echo "weft inline=8192 rep $rep (size time_us busbw_GBps)"
  weft WEFT_NET_INLINE=8192
  echo "ompi tcp netns rep $rep (size time_us busbw_GBps)"
  ompi
done
IN
chmod +x "$inner"
delay=$(mktemp /tmp/weft-delay-XXXXXX.sh)
trap 'rm -f "$inner" "$delay"' EXIT
cat >"$delay" <<'IN'
#!/usr/bin/env bash
tune=$(mktemp /tmp/weft-tune-XXXXXX)
tests/multihost/run_job.sh -l 2x1 -m net build/bin/weft-calibrate --link inter -o "$tune" >/dev/null 2>&1
tests/multihost/run_job.sh -l 1x2 -m net build/bin/weft-calibrate --link intra -o "$tune" >/dev/null 2>&1
echo "2 ms links: calibrated $(grep -v '^#' "$tune" | tr '\n' ' ')"
for rep in $(seq 1 "$REPS"); do
  for algo in tuner allreduce:ring; do
    a=$algo; [ "$algo" = tuner ] && a=""
    echo "delay 4x2 $algo rep $rep (size time_us): $(WEFT_TUNE_FILE=$tune NCCL_ALGO=$a \
      tests/multihost/run_job.sh -l 4x2 -m net build/bin/all_reduce_perf -b 8 -e 8 -z 2 -n 20 -w 3 2>&1 |
      awk '/^ +[0-9]/{print $1, $6}')"
  done
done
rm -f "$tune"
IN
chmod +x "$delay"
{
  tests/multihost/netns.sh -k 2 -- "$inner"
  WEFT_BUILD_DIR=build tests/multihost/netns.sh -k 4 --wire-delay 2 -- "$delay"
} | tee "$OUTF"
