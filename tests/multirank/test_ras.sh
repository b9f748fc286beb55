#!/usr/bin/env bash
# test_ras.sh — RAS on one host: a 4-rank job (ras_rank: 20 AllReduce and a
# Broadcast on the world, 3 AllGather on each half of a split) asked over
# NCCL's client protocol, by weft-status --ras and by raw protocol lines.
#
#   tests/multirank/test_ras.sh BUILD_DIR
#
# Checks: the handshake and the protocol's errors; the text report's
# sections, groups and counts; the JSON answer parses and holds NCCL's
# fields with the right counts; a rank stopped with SIGSTOP while the others
# run one more AllReduce is reported lagging (its process stopped, its
# counts one behind) and the answer does not wait the TIMEOUT for it; a
# rank killed with SIGKILL is reported dead, by pid; MONITOR reports the
# stop and the death; with NCCL_RAS_ENABLE=0 nothing listens. Exit 0 when
# all hold, 1 otherwise.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 1 ] && [ -d "$1" ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
build=$(cd "$1" && pwd)
. "$here/ras_job.sh"
trap ras_job_end EXIT
status() { timeout 30 "$build/bin/weft-status" --ras --timeout "${T:-3}" "$@"; }
# Raw protocol lines: each line sent, the answer's first line printed.
raw() {
  python3 - "$NCCL_RAS_ADDR" "$@" <<'PY'
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=5)
f = s.makefile("rw")
for line in sys.argv[2:]:
    f.write(line + "\n"); f.flush()
    print(f.readline().rstrip("\n"))
PY
}
json_check() {  # python expression over d, the parsed answer
  python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if ($1) else 1)"
}

ras_job_start "$build" 4 || exit 1

out=$(raw "CLIENT PROTOCOL 2" "TIMEOUT 2" "SET FORMAT xml" "set format json" "TIMEOUT -1" "MONITOR bogus" "FROB")
ras_expect "handshake" "$out" "^SERVER PROTOCOL 2$"
ras_expect "TIMEOUT accepted" "$(sed -n 2p <<<"$out")" "^OK$"
ras_expect "an unknown format refused" "$out" "^ERROR: Invalid format xml$"
ras_expect "keywords in any case" "$(sed -n 4p <<<"$out")" "^OK$"
ras_expect "a negative timeout refused" "$out" "^ERROR: Invalid timeout value -1$"
ras_expect "an unknown event group refused" "$out" "^ERROR: Invalid event group 'bogus'$"
ras_expect "an unknown command refused" "$out" "^ERROR: Unknown command FROB$"

txt=$(status)
for s in "Job summary" "Communicators \(gathered" "Operations launched" "Errors" "Warnings"; do ras_expect "section $s" "$txt" "^$s"; done
ras_expect "one host, 4 processes, all alive" "$txt" "^ +1 +4 +4 +4 +0 +0 +0$"
ras_expect "the world: group 0, 4 ranks on one host, running, OK" "$txt" "^ +0 +1 +1 +4 +4  RUNNING +OK$"
ras_expect "the halves grouped: 2 communicators of 2" "$txt" "^ +1 +2 +1 +2 +2  RUNNING +OK$"
ras_expect "the world's counts" "$txt" "^#0-0 \([0-9a-f]{16}\), 4 ranks: AllReduce 20, Broadcast 1$"
ras_expect "each half's counts" "$(grep -c '2 ranks: AllGather 3$' <<<"$txt")" "^2$"

js=$(status --json)
if json_check "d['communicators_count'] == 3 and sorted(c['size'] for c in d['communicators']) == [2, 2, 4]" <<<"$js"; then
  ras_ok "JSON parses: 3 communicators of 4, 2, 2"; else ras_bad "JSON answer"; head -40 <<<"$js"; fi
w="[c for c in d['communicators'] if c['size'] == 4][0]"
json_check "all(r['collective_counts']['AllReduce'] == 20 and r['collective_counts']['Broadcast'] == 1 for r in $w['ranks']) and $w['missing_ranks_count'] == 0" <<<"$js" \
  && ras_ok "JSON: every rank of the world launched 20 AllReduce and 1 Broadcast" || ras_bad "JSON counts"
json_check "all(k in d for k in ('nccl_version', 'timestamp', 'communicators', 'ras')) and 'collection_time_sec' in d['ras'] and all(k in $w['ranks'][0]['status'] for k in ('init_state', 'async_error', 'finalize_called', 'destroy_flag', 'abort_flag'))" <<<"$js" \
  && ras_ok "JSON: NCCL's fields" || ras_bad "JSON fields"

# The monitor runs until it has seen the death and the failed communicator
# (or 20 s after the kill): a fixed window ends too soon on a loaded machine.
timeout 90 "$build/bin/weft-status" --ras --monitor --for 80 >"$ras_dir/monitor.txt" 2>&1 &
mon=$!
sleep 1.5  # the monitor's baseline
# The host's processes share the port, so the monitor's stream comes from one
# of them, which can report neither its own stop nor its own death: the
# ranks stopped (s, 1 unless that one serves) and killed (k) are others.
server=$(ss -tnpH state established "( sport = :${NCCL_RAS_ADDR##*:} )" | grep -o 'pid=[0-9]*' | head -1)
s=1 k=3
[ "$server" = "pid=$(ras_pid 1)" ] && s=3 k=2
[ "$server" = "pid=$(ras_pid 3)" ] && k=2
p1=$(ras_pid $s) p3=$(ras_pid $k)
kill -STOP "$p1"
touch "$ras_dir/go"  # the others start AllReduce #21 and wait on rank s
sleep 0.5
start=$SECONDS
txt=$(T=10 status --verbose)
ras_expect "rank $s lags, stopped, by pid" "$txt" "^  rank $s lags: AllReduce 20, Broadcast 1 -- process $p1 on host [0-9.]+, stopped"
ras_expect "the others launched one more" "$txt" "^  AllReduce: 3 ranks launched 21, 1 fewer$"
ras_expect "the others wait on rank $s" "$txt" "waiting on rank $s in AllReduce #21"
[ $((SECONDS - start)) -lt 8 ] && ras_ok "a stopped process is not waited for (TIMEOUT 10)" || ras_bad "the answer waited $((SECONDS - start)) s"
js=$(status --json)
json_check "any(r['rank'] == $s and r['lagging'] and r['process_state'] == 'stopped' and r['pid'] == $p1 for c in d['communicators'] if c['size'] == 4 for r in c['ranks'])" <<<"$js" \
  && ras_ok "JSON: rank $s lagging, stopped" || ras_bad "JSON lagging"
kill -CONT "$p1"
ras_wait_files done 4 || ras_fails=$((ras_fails + 1))

kill -KILL "$p3"
sleep 0.5
txt=$(status)
ras_expect "a dead process, by pid" "$txt" "^  process $p3 on host [0-9.]+ has died$"
ras_expect "the world names its dead rank" "$txt" "^  rank $k -- process $p3 on host [0-9.]+, dead$"
js=$(status --json)
json_check "any(m['rank'] == $k and m['status']['considered_dead'] for c in d['communicators'] if c['size'] == 4 for m in c['missing_ranks'])" <<<"$js" \
  && ras_ok "JSON: rank $k missing, considered dead" || ras_bad "JSON dead"
for ((i = 0; i < 200; i++)); do
  grep -q "PEER_DEAD: process $p3 " "$ras_dir/monitor.txt" && grep -q COMM_FAILED "$ras_dir/monitor.txt" && break
  sleep 0.1
done
kill "$mon" 2>/dev/null
wait "$mon" 2>/dev/null
mtxt=$(cat "$ras_dir/monitor.txt")
ras_expect "MONITOR: the stop" "$mtxt" "PEER_STOPPED: process $p1 on host"
ras_expect "MONITOR: the death" "$mtxt" "PEER_DEAD: process $p3 on host"
ras_expect "MONITOR: the failed communicator" "$mtxt" "COMM_FAILED: communicator [0-9a-f]{16} of 4 ranks"
ras_job_end

# RAS off: nothing listens, and weft-status says so.
NCCL_RAS_ENABLE=0 ras_job_start "$build" 2 || exit 1
out=$(timeout 30 "$build/bin/weft-status" --ras 2>&1)
ras_expect "NCCL_RAS_ENABLE=0: no server" "$out" "no RAS server at $NCCL_RAS_ADDR"
ras_job_end

[ "$ras_fails" -eq 0 ] && echo "test_ras: all passed" || echo "test_ras: $ras_fails failed"
[ "$ras_fails" -eq 0 ]
