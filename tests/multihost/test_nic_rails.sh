#!/usr/bin/env bash
# test_nic_rails.sh BUILD_DIR — each rank's network traffic leaves through
# the NIC of its NUMA node, and several NICs are used as rails.
#
# Two hosts (netns.sh -k 2 --rails 2), each with two NICs: wv0 on rail 0
# and wv1 on rail 1, separate subnets and bridges joined by a router, each
# host routing by source. Every host gets its own NCCL_TOPO_FILE, written
# here: two NUMA nodes with one NIC each, <net name="wv0"> under node 0
# and <net name="wv1"> under node 1 ("rails"), or the other way round
# ("swapped"). Jobs are 2 hosts x 2 ranks in net mode (one WEFT_HOSTID per
# host: ranks on different hosts use the network transport), so local rank
# r sits on NUMA node r and must use that node's NIC. Checks:
#
#   - conformance_rank's sweep (every collective, datatype and op) is exact
#     over both rails, and the logs show the socket backend offering both
#     interfaces ("NET/Socket : Using [0]wv0:... [1]wv1:...") and each rank,
#     named by its host (the namespace's name, set in a UTS namespace of
#     its own), using its node's NIC ("rank 1 uses NIC wv1 (nearest its
#     NUMA node 1)");
#   - sendrecv_perf -c 1 (each rank sends to the next: across hosts only
#     local rank 1 sends, to the other host's local rank 0): the kernel's
#     tx_bytes inside each namespace show that traffic on local rank 1's
#     NIC, wv1 with the rails files and wv0 with the swapped ones, and next
#     to nothing (acknowledgements) on the other;
#   - NCCL_SOCKET_IFNAME==wv0 narrows the devices to one: all_reduce_perf
#     -c 1 is exact and its traffic all on wv0, none on wv1.
#
# Prints one line per check and "N passed, M failed"; exits 1 on a
# failure, 77 (skipped, saying why) where namespaces with policy routing
# cannot be made (not root, no ip netns). Takes about 30 s.
set -u

here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd) || exit 1
export WEFT_BUILD_DIR=$build
job_limit=60

# ---- Inside the namespaces (netns.sh runs this script again with --inside).
inside() {  # tmp results
  local tmp=$1 results=$2 log=$1/jobs.log
  ok() { echo "ok    $*" | tee -a "$results"; }
  bad() { echo "FAIL  $*" | tee -a "$results"; }
  local hosts
  read -ra hosts <<<"$WEFT_MH_HOSTS"

  # Per host, a topology file named after its namespace; the ranks find it
  # with `ip netns identify`.
  write_topo() {  # file host nic-of-numa-0 nic-of-numa-1
    cat >"$1" <<EOF
<?xml version="1.0"?>
<!-- $2, written by test_nic_rails.sh: two NUMA nodes, one NIC each -->
<system version="1">
  <cpu numaid="0" affinity="00000001" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="85">
    <nic>
      <net name="$3" dev="0" speed="10000" port="0" latency="0.000000" gdr="0"/>
    </nic>
  </cpu>
  <cpu numaid="1" affinity="00000002" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="85">
    <nic>
      <net name="$4" dev="1" speed="10000" port="0" latency="0.000000" gdr="0"/>
    </nic>
  </cpu>
</system>
EOF
  }
  local ns
  mkdir -p "$tmp/rails" "$tmp/swapped"
  for ns in "${hosts[@]}"; do
    write_topo "$tmp/rails/$ns.xml" "$ns" wv0 wv1
    write_topo "$tmp/swapped/$ns.xml" "$ns" wv1 wv0
  done

  # A rank runs as its namespace's host: the namespace's name as its host
  # name (in logs) and that host's topology file.
  cat >"$tmp/as_host.sh" <<'EOF'
#!/bin/sh
# as_host.sh TOPOLOGY_DIR PROG ARGS...
ns=$(ip netns identify $$)
export NCCL_TOPO_FILE="$1/$ns.xml"
shift
exec unshare --uts sh -c 'hostname "$0" && exec "$@"' "$ns" "$@"
EOF
  chmod +x "$tmp/as_host.sh"

  # Runs one 2x2 job (net mode) with the topology files of $1, the output in $tmp/out.
  job() {  # topology-dir ifname prog args...
    local topo=$1 ifname=$2
    shift 2
    echo "== $* (topology $topo, NCCL_SOCKET_IFNAME=$ifname)" >>"$log"
    WEFT_MH_IFNAME=$ifname NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET,INIT "$here/run_job.sh" -l 2x2 -m net -t "$job_limit" \
      --tag-output -- "$tmp/as_host.sh" "$tmp/$topo" "$@" >"$tmp/out" 2>&1
    local rc=$?
    cat "$tmp/out" >>"$log"
    return $rc
  }
  # tx_bytes of every host's NICs, "host:dev=bytes" per line.
  counters() {
    local ns dev
    for ns in "${hosts[@]}"; do
      for dev in wv0 wv1; do
        echo "$ns:$dev=$(ip netns exec "$ns" cat "/sys/class/net/$dev/statistics/tx_bytes")"
      done
    done
  }
  # What dev of host i sent between two counter snapshots.
  sent() {  # before after i dev
    local key="${hosts[$3]}:$4"
    echo $(($(grep "^$key=" <<<"$2" | cut -d= -f2) - $(grep "^$key=" <<<"$1" | cut -d= -f2)))
  }
  # Each rank, on its own host (ranks 0,1 on host 0; 2,3 on host 1), uses
  # the NIC given for its local rank.
  uses_ok() {  # why-pattern nic-of-local-0 nic-of-local-1
    local r want
    for r in 0 1 2 3; do
      want=$2
      [ $((r % 2)) -eq 1 ] && want=$3
      grep -q "^\[$r\] ${hosts[r / 2]}:.* rank $r uses NIC $want ($1" "$tmp/out" || return 1
    done
  }

  local start rc b a
  # 1. Both rails, exact results, NCCL's device line, each rank on its node's NIC.
  start=$SECONDS
  job rails wv "$build/tests/progs/conformance_rank"
  rc=$?
  local using
  using=$(grep -c 'NET/Socket : Using \[0\]wv0:[0-9.]*<0> \[1\]wv1:[0-9.]*<0>$' "$tmp/out")
  # Unbound host-memory ranks start their threads (the proxy) near their NIC: local rank r on NUMA node r's CPU.
  local near
  near=$(grep -cE '^\[([0-3])\] .* rank \1: threads started during init run on the 1 CPUs of NUMA node ([01]), near its NIC' "$tmp/out")
  if [ "$rc" -eq 0 ] && [ "$using" -eq 4 ] && uses_ok "nearest its NUMA node" wv0 wv1 &&
    grep -q 'rank 1 uses NIC wv1 (nearest its NUMA node 1)' "$tmp/out" && [ "$near" -ge 4 ] &&
    grep -q 'rank 3: threads started during init run on the 1 CPUs of NUMA node 1, near its NIC' "$tmp/out"; then
    ok "conformance 2x2 over two rails: exact; every rank offered wv0 and wv1, local rank r uses wv<r> and starts its threads on NUMA node r ($((SECONDS - start)) s)"
  else
    bad "conformance 2x2 over two rails: exit $rc, $using of 4 ranks listed both NICs, $near placed threads near their NIC; 'uses NIC' lines:"
    grep -E 'uses NIC|FAIL' "$tmp/out" | head -8 | sed 's/^/      /'
  fi

  # 2, 3. Who sends what: across hosts only local rank 1 sends (sendrecv
  # passes to the next rank), so its NIC carries the bytes, the other only
  # acknowledgements.
  local topo busy idle i d_busy d_idle fine min=$((20 * 8 * 1024 * 1024))
  for topo in rails swapped; do
    busy=wv1 idle=wv0
    [ "$topo" = swapped ] && busy=wv0 idle=wv1
    start=$SECONDS
    b=$(counters)
    job "$topo" wv "$build/bin/sendrecv_perf" -b 8M -e 8M -n 20 -w 2 -c 1
    rc=$?
    a=$(counters)
    fine=1
    local detail=""
    for i in 0 1; do
      d_busy=$(sent "$b" "$a" "$i" "$busy") d_idle=$(sent "$b" "$a" "$i" "$idle")
      detail+=" host $i: $busy $((d_busy / 1048576)) MiB, $idle $((d_idle / 1024)) KiB;"
      [ "$d_busy" -ge "$min" ] && [ "$d_idle" -lt $((d_busy / 10)) ] || fine=0
    done
    if [ "$rc" -eq 0 ] && [ "$fine" -eq 1 ] && uses_ok "nearest its NUMA node" "$idle" "$busy"; then
      ok "sendrecv 2x2, $topo topology: local rank 1's traffic left through $busy, its NUMA node's NIC:$detail ($((SECONDS - start)) s)"
    else
      bad "sendrecv 2x2, $topo topology: exit $rc;$detail (want >= $((min / 1048576)) MiB on $busy, under a tenth of that on $idle)"
      grep -E 'uses NIC|wrong|FAIL' "$tmp/out" | head -8 | sed 's/^/      /'
    fi
  done

  # 4. NCCL_SOCKET_IFNAME narrows to one interface: it carries everything.
  start=$SECONDS
  b=$(counters)
  job rails =wv0 "$build/bin/all_reduce_perf" -b 8M -e 8M -n 10 -w 2 -c 1
  rc=$?
  a=$(counters)
  fine=1
  local detail=""
  for i in 0 1; do
    d_busy=$(sent "$b" "$a" "$i" wv0) d_idle=$(sent "$b" "$a" "$i" wv1)
    detail+=" host $i: wv0 $((d_busy / 1048576)) MiB, wv1 $((d_idle / 1024)) KiB;"
    [ "$d_busy" -ge "$min" ] && [ "$d_idle" -lt 262144 ] || fine=0
  done
  using=$(grep -c 'NET/Socket : Using \[0\]wv0:[0-9.]*<0>$' "$tmp/out")
  if [ "$rc" -eq 0 ] && [ "$fine" -eq 1 ] && [ "$using" -eq 4 ] && uses_ok "the only device" wv0 wv0; then
    ok "all_reduce 2x2 with NCCL_SOCKET_IFNAME==wv0: exact, every byte on wv0:$detail ($((SECONDS - start)) s)"
  else
    bad "all_reduce 2x2 with NCCL_SOCKET_IFNAME==wv0: exit $rc, $using of 4 ranks offered wv0 alone;$detail"
    grep -E 'uses NIC|wrong|FAIL' "$tmp/out" | head -8 | sed 's/^/      /'
  fi
}

if [ "${2:-}" = --inside ]; then
  inside "$3" "$4"
  exit 0
fi

# ---- Outside: make the namespaces, run the checks inside.
if ! why=$("$here/netns.sh" --check --rails 2); then
  echo "nic rails: skipped: $why"
  exit 77
fi
for p in "$build/tests/progs/conformance_rank" "$build/bin/sendrecv_perf" "$build/bin/all_reduce_perf"; do
  [ -x "$p" ] || { echo "test_nic_rails: $p is missing: build the project first" >&2; exit 1; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-nic-rails.XXXXXX") || exit 1
results=$tmp/results
: >"$results"
net=""
on_signal() {
  trap '' INT TERM HUP
  [ -n "$net" ] && kill -TERM "$net" 2>/dev/null
  wait
  rm -rf "$tmp"
  exit $((128 + $1))
}
trap 'on_signal 1' HUP
trap 'on_signal 2' INT
trap 'on_signal 15' TERM

start=$SECONDS
"$here/netns.sh" -k 2 --rails 2 -- "$0" "$build" --inside "$tmp" "$results" 2>>"$tmp/jobs.log" &
net=$!
wait "$net"
rc=$?
net=""
[ "$rc" -eq 0 ] || echo "FAIL  the run inside the namespaces ended with status $rc" | tee -a "$results"
passed=$(grep -c '^ok' "$results")
failed=$(grep -c '^FAIL' "$results")
echo "nic rails: $passed passed, $failed failed ($((SECONDS - start)) s)"
if [ "$failed" -gt 0 ] || [ "$passed" -eq 0 ]; then
  echo "logs kept in $tmp/jobs.log"
  exit 1
fi
rm -rf "$tmp"
exit 0
