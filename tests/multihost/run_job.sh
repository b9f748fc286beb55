#!/usr/bin/env bash
# run_job.sh — run one weft program as one job over several hosts: one
# weftrun per host, inside the namespaces netns.sh made, or as plain
# processes on loopback when there are none.
#
#   run_job.sh [-l LAYOUT] [-m shm|net] [-t SECONDS] [--tag-output] [--keep-going] [--weftrun PATH]
#              [--] PROG [ARGS...]
#
# LAYOUT gives the ranks of each host: "HxR" (H hosts of R ranks) or a
# comma list ("2,1,3"); default 2x2. Hosts are the namespaces in
# WEFT_MH_HOSTS (from netns.sh), in order, with NCCL_SOCKET_IFNAME set to
# WEFT_MH_IFNAME; without WEFT_MH_HOSTS every host is a group of processes
# here, on loopback. -m sets WEFT_HOSTID, the identity that decides which
# ranks share memory: "shm" gives every host the same one (ranks in
# different namespaces then still use shared memory, and only bootstrap
# crosses the links), "net" one per host (ranks on different hosts must use
# the network transport). Default: $WEFT_MULTIHOST_MODE, else shm.
#
# Host 0's weftrun creates the job id (written to a private temporary file)
# and hosts the rendezvous; the others start once the file exists and join
# with --id-file. Every weftrun runs under -t SECONDS (default 120) and
# WEFT_TIMEOUT (default min(60, SECONDS)) bounds each wait inside the
# library (WEFT_TIMEOUT_FAIL defaults to 1 here, so a stuck collective fails
# rather than only warning). When a host's weftrun fails, the others get SIGTERM (weftrun
# forwards it to its ranks); with --keep-going (passed on to every weftrun)
# nothing is stopped, so a fault test sees how the survivors fare. SIGINT/SIGTERM/SIGHUP here stop every weftrun
# the same way. Exit status: 0 when every host succeeded, else the first
# failure's (124 for a time limit), 2 for bad usage.
set -u

here=$(cd "$(dirname "$0")" && pwd)
layout=2x2
mode=${WEFT_MULTIHOST_MODE:-shm}
limit=120
tag=()
keep=()
weftrun=${WEFT_BUILD_DIR:-$here/../../build}/bin/weftrun

usage() {
  sed -n '6,7s/^# \{0,1\}//p' "$0" >&2
  exit 2
}

while [ $# -gt 0 ]; do
  case $1 in
    -l) [ $# -ge 2 ] || usage; layout=$2; shift 2 ;;
    -m) [ $# -ge 2 ] || usage; mode=$2; shift 2 ;;
    -t) [ $# -ge 2 ] || usage; limit=$2; shift 2 ;;
    --tag-output) tag=(--tag-output); shift ;;
    --keep-going) keep=(--keep-going); shift ;;
    --weftrun) [ $# -ge 2 ] || usage; weftrun=$2; shift 2 ;;
    -h | --help) usage ;;
    --) shift; break ;;
    -*) echo "run_job.sh: unknown option '$1'" >&2; usage ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || usage
[[ $limit =~ ^[0-9]+$ ]] && [ "$limit" -ge 1 ] || { echo "run_job.sh: -t needs whole seconds" >&2; exit 2; }
case $mode in shm | net) ;; *) echo "run_job.sh: -m must be shm or net, not '$mode'" >&2; exit 2 ;; esac
[ -x "$weftrun" ] || { echo "run_job.sh: $weftrun is missing: build the project first" >&2; exit 2; }

# Ranks per host.
per_host=()
if [[ $layout =~ ^([0-9]+)x([0-9]+)$ ]]; then
  for ((i = 0; i < BASH_REMATCH[1]; i++)); do per_host+=("${BASH_REMATCH[2]}"); done
elif [[ $layout =~ ^[0-9]+(,[0-9]+)*$ ]]; then
  IFS=, read -ra per_host <<<"$layout"
fi
total=0
for r in "${per_host[@]}"; do
  [ "$r" -ge 1 ] || { echo "run_job.sh: every host needs at least one rank (layout '$layout')" >&2; exit 2; }
  total=$((total + r))
done
[ "${#per_host[@]}" -ge 1 ] || { echo "run_job.sh: bad layout '$layout': use HxR or a comma list" >&2; exit 2; }

namespaces=()
[ -n "${WEFT_MH_HOSTS:-}" ] && read -ra namespaces <<<"$WEFT_MH_HOSTS"
if [ "${#namespaces[@]}" -gt 0 ] && [ "${#namespaces[@]}" -lt "${#per_host[@]}" ]; then
  echo "run_job.sh: layout '$layout' needs ${#per_host[@]} hosts, netns.sh made ${#namespaces[@]}" >&2
  exit 2
fi
ifname=${WEFT_MH_IFNAME:-lo}
[ "${#namespaces[@]}" -gt 0 ] || ifname=lo
lib_timeout=${WEFT_TIMEOUT:-$((limit < 60 ? limit : 60))}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-job.XXXXXX") || exit 1
idfile=$tmp/id
pids=()    # weftruns still running
hostof=()  # pid -> host index
status=0

stop_all() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
}

on_signal() {
  trap '' INT TERM HUP
  echo "run_job.sh: signal $1: stopping every host" >&2
  stop_all
  wait
  rm -rf "$tmp"
  exit $((128 + $1))
}
trap 'on_signal 1' HUP
trap 'on_signal 2' INT
trap 'on_signal 15' TERM

# Starts host i's weftrun in the background: id_args say how it gets the id.
start_host() {  # index first_rank id_args...
  local i=$1 first=$2 hostid="weft-mh-$$"
  shift 2
  [ "$mode" = net ] && hostid="weft-mh-$$-h$i"
  local cmd=(env -u NCCL_COMM_ID WEFT_HOSTID="$hostid" NCCL_SOCKET_IFNAME="$ifname" WEFT_TIMEOUT="$lib_timeout"
    WEFT_TIMEOUT_FAIL="${WEFT_TIMEOUT_FAIL:-1}"
    "$weftrun" -n "${per_host[i]}" --nranks "$total" --first-rank "$first" "$@" -t "$limit" "${tag[@]}" "${keep[@]}"
    -- "${prog[@]}")
  if [ "${#namespaces[@]}" -gt 0 ]; then
    ip netns exec "${namespaces[i]}" "${cmd[@]}" &
  else
    "${cmd[@]}" &
  fi
  pids+=($!)
  hostof[$!]=$i
}

prog=("$@")
where=${namespaces[*]:-loopback}
echo "run_job.sh: $total ranks as ${per_host[*]} on ${#per_host[@]} hosts ($where), mode $mode: ${prog[*]}" >&2

start_host 0 0 --id-out "$idfile"
# The others need the id: wait for host 0 to write it (or to fail).
deadline=$((SECONDS + limit))
while [ ! -s "$idfile" ] && kill -0 "${pids[0]}" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.05; done
if [ ! -s "$idfile" ]; then
  echo "run_job.sh: host 0 did not create the job id" >&2
  stop_all
  wait "${pids[0]}"
  rc=$?
  rm -rf "$tmp"
  exit $((rc ? rc : 1))
fi
first=${per_host[0]}
for ((i = 1; i < ${#per_host[@]}; i++)); do
  start_host "$i" "$first" --id-file "$idfile"
  first=$((first + per_host[i]))
done

# Reap the hosts as they end; the first failure stops the rest.
declare -A host_status
host_ended() {  # host_ended PID STATUS
  host_status[${hostof[$1]}]=$2
  local p running=()
  for p in "${pids[@]}"; do [ "$p" = "$1" ] || running+=("$p"); done
  pids=("${running[@]}")
  if [ "$2" -ne 0 ] && [ "$status" -eq 0 ]; then
    status=$2
    if [ "${#keep[@]}" -eq 0 ]; then
      echo "run_job.sh: host ${hostof[$1]} failed (weftrun exit $2); stopping the others" >&2
      stop_all
    fi
  fi
}
while [ "${#pids[@]}" -gt 0 ]; do
  done_pid=""
  wait -n -p done_pid "${pids[@]}"
  rc=$?
  if [ -n "${done_pid:-}" ]; then
    host_ended "$done_pid" "$rc"
    continue
  fi
  # wait -n unsets done_pid, and bash may answer "no such job" for a host
  # that ended beside another: take the ended ones by plain wait, which
  # still knows their status.
  ended=0
  for p in "${pids[@]}"; do
    kill -0 "$p" 2>/dev/null && continue
    wait "$p" 2>/dev/null
    host_ended "$p" $?
    ended=1
  done
  [ "$ended" -eq 1 ] || sleep 0.1  # nothing ended: do not spin
done
rm -rf "$tmp"

first=0
for ((i = 0; i < ${#per_host[@]}; i++)); do
  last=$((first + per_host[i] - 1))
  echo "run_job.sh: host $i (${namespaces[i]:-loopback}) ranks $first-$last: exit ${host_status[$i]}" >&2
  first=$((first + per_host[i]))
done
exit "$status"
