#!/usr/bin/env bash
# test_ras.sh BUILD_DIR — RAS across hosts: a job of 2 hosts x 2 ranks
# (network namespaces, netns.sh; each host its own identity, so the data
# goes over the network transport) asked through NCCL_RAS_ADDR's default,
# localhost:28028, inside each host.
#
#   - from either host, the report covers the whole job: 2 hosts, 4
#     processes alive, the world communicator on 2 hosts, its counts;
#   - host 1's link taken down (a partition): host 0's answer, within the
#     TIMEOUT (2 s), says host 1 is unreachable, naming its processes,
#     and its ranks missing, unresponsive but not dead (JSON), named by
#     process also in communicators the answering process is not in;
#   - the link back up: every process alive again;
#   - with NCCL_SRC, NVIDIA's ncclras (tests/abi/build_ncclras.sh) from
#     host 1 gets the whole job (skipped, saying so, otherwise).
# Prints one line per check; exits 0 when all hold, 1 otherwise, 77 where
# namespaces cannot be made (not root, no ip netns).
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd) || exit 1
if [ -z "${WEFT_MH_HOSTS:-}" ]; then
  if ! why=$("$here/netns.sh" --check); then echo "SKIP: $why"; exit 77; fi
  exec "$here/netns.sh" -k 2 -- "$0" "$build"
fi
. "$here/../multirank/ras_job.sh"  # its checks' helpers
read -ra hosts <<<"$WEFT_MH_HOSTS"
read -ra addrs <<<"$WEFT_MH_ADDRS"
export WEFT_BUILD_DIR=$build
dir=$(mktemp -d "${TMPDIR:-/tmp}/weft-ras-mh.XXXXXX") || exit 1
status_on() {  # host-index weft-status options...
  local h=$1
  shift
  timeout 30 ip netns exec "${hosts[h]}" "$build/bin/weft-status" --ras "$@"
}
cleanup() {
  ip netns exec "${hosts[1]}" ip link set wv0 up 2>/dev/null
  touch "$dir/go" "$dir/end"
  for _ in $(seq 300); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
  kill -TERM "$job" 2>/dev/null
  wait "$job" 2>/dev/null
  rm -rf "$dir"
}
unset NCCL_RAS_ADDR
"$here/run_job.sh" -l 2x2 -m net --keep-going -t 100 -- "$build/tests/progs/ras_rank" "$dir" >"$dir/job.log" 2>&1 &
job=$!
trap cleanup EXIT
for _ in $(seq 300); do [ "$(ls "$dir"/pid.* 2>/dev/null | wc -l)" -ge 4 ] && break; sleep 0.1; done
[ "$(ls "$dir"/pid.* 2>/dev/null | wc -l)" -ge 4 ] || { echo "FAIL: the job did not start"; cat "$dir/job.log"; exit 1; }

for h in 0 1; do
  txt=$(status_on $h --timeout 3)
  ras_expect "from host $h: 2 hosts, 2 processes each, 4 alive" "$txt" "^ +2 +2 +4 +4 +0 +0 +0$"
  ras_expect "from host $h: the world on 2 hosts, 2 ranks each, running" "$txt" "^ +0 +1 +2 +2 +4  RUNNING +OK$"
  ras_expect "from host $h: the world's counts" "$txt" "4 ranks: AllReduce 20, Broadcast 1$"
done

# NVIDIA's ncclras, unmodified, from the other host (where NCCL_SRC names its sources).
if why=$("$here/../abi/build_ncclras.sh" "${NCCL_SRC:-}" "$dir/ncclras" 2>"$dir/ncclras.log"); then
  txt=$(timeout 30 ip netns exec "${hosts[1]}" "$dir/ncclras" -t 3 2>&1)
  ras_expect "ncclras from host 1: the whole job" "$txt" "^ +2 +2 +4 +4 +0 +0 +0$"
  ras_expect "ncclras from host 1: the world's counts" "$txt" "4 ranks: AllReduce 20, Broadcast 1$"
else
  echo "SKIP: ncclras across hosts: $why"
fi

ip netns exec "${hosts[1]}" ip link set wv0 down
start=$SECONDS
txt=$(status_on 0 --timeout 2)
spent=$((SECONDS - start))
ras_expect "partitioned: host 1 unreachable, its processes named" "$txt" \
  "^  host ${addrs[1]}: none of its 2 processes answered \(pid $(cat "$dir/pid.2") $(cat "$dir/pid.3")\)"
ras_expect "partitioned: 2 alive, 2 unreachable" "$txt" "^ +2 +2 +4 +2 +0 +0 +2$"
ras_expect "partitioned: the world incomplete" "$txt" "^  no data from 2 ranks$"
if grep -q "process unknown" <<<"$txt"; then
  ras_bad "a rank of a half the answering process is not in went unnamed"
else ras_ok "partitioned: every missing rank named, also in communicators the answering process is not in"; fi
[ "$spent" -le 4 ] && ras_ok "the answer came within the TIMEOUT (${spent} s)" || ras_bad "the answer took $spent s"
js=$(status_on 0 --timeout 2 --json)
if python3 -c "import json,sys; d=json.load(sys.stdin); w=[c for c in d['communicators'] if c['size']==4][0]; m=w['missing_ranks']; sys.exit(0 if sorted(x['rank'] for x in m)==[2,3] and all(x['status']['unresponsive'] and not x['status']['considered_dead'] and x['host']=='${addrs[1]}' for x in m) and d['ras']['timeouts_count']==2 else 1)" <<<"$js"; then
  ras_ok "JSON: ranks 2 and 3 missing on ${addrs[1]}, unresponsive, not dead"
else
  ras_bad "JSON of the partition"; head -80 <<<"$js"
fi
ip netns exec "${hosts[1]}" ip link set wv0 up
sleep 1
txt=$(status_on 0 --timeout 3)
ras_expect "the link back: 4 alive" "$txt" "^ +2 +2 +4 +4 +0 +0 +0$"
[ "$ras_fails" -eq 0 ] && echo "multihost test_ras: all passed"
[ "$ras_fails" -eq 0 ]
