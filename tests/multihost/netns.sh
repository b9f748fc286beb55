#!/usr/bin/env bash
# netns.sh — a private network of K "hosts" for multi-host tests.
#
#   netns.sh [-k HOSTS] [--rails N] [--delay MS] [--jitter MS] [--loss PCT] [--rate RATE] -- COMMAND [ARGS...]
#   netns.sh [-k HOSTS] --wire-delay MS [--wire-loss PCT] -- COMMAND [ARGS...]
#   netns.sh --check [--delay MS ... | --wire-delay MS]   exit 0 if this machine can do that, else say why, exit 77
#   netns.sh --clean-stale              remove namespaces left by runs that are gone
#
# Creates network namespaces weft-<pid>-h0 .. weft-<pid>-h<K-1> (the pid of
# this script, so parallel runs never clash) and weft-<pid>-br, which holds
# a bridge; each host namespace is joined to the bridge by a veth pair whose
# host end is named wv0 in every namespace (so NCCL_SOCKET_IFNAME=wv0 works
# on every host) and carries 10.77.<x>.<i+1>/24, x taken from the pid. The
# veth pairs are made from inside the namespaces, so nothing appears in the
# caller's namespace at any time. Loopback is up everywhere.
#
# --rails N gives every host N NICs, wv0 .. wv<N-1>, as on a multi-rail
# cluster: rail r is its own bridge (br<r> in weft-<pid>-br, ports h<i>
# for rail 0 and h<i>r<r> for the others) and its own subnet, 10.<77+r>.<x>
# with host i at .<i+1>. The bridge namespace routes between the rails
# (each bridge has .254), as a spine joins rail switches, and each host
# routes by source (a rule per address, looking up a table whose default
# leaves through that address's NIC), so a socket bound to wv<r>'s address
# sends through wv<r> whatever rail the peer is on.
#
# Shaping applies to each host's egress on wv0 (so a delay counts once per
# direction): --delay/--jitter in milliseconds and --loss in percent use tc
# netem (rate folded in); --rate alone uses tc tbf. A kernel without the
# qdisc is a clear error (exit 77: a test should count it as skipped).
#
# --wire-delay replaces the bridge with delay_hub (built by make test in
# $WEFT_BUILD_DIR/tests/multihost/): wv0 is then a TAP device in every host,
# and the hub holds each frame MS milliseconds before passing it to the
# other hosts (--wire-loss drops that percentage). It needs no qdisc, so it
# gives latency where the kernel has no netem; it is slow for bulk data.
#
# COMMAND runs in the caller's namespace with WEFT_MH_HOSTS (the host
# namespaces, space-separated, in order), WEFT_MH_ADDRS (their addresses)
# and WEFT_MH_IFNAME (wv0; with --rails, "wv", which names every rail)
# exported, and WEFT_MH_RAILS (N) with WEFT_MH_RAIL_SUBNETS (each rail's
# 10.<77+r>.<x>); run_job.sh reads them. The exit status
# is COMMAND's. Everything is removed when COMMAND ends, when setup fails,
# and on SIGINT/SIGTERM/SIGHUP (COMMAND gets SIGTERM first, then whatever
# still runs inside the namespaces is killed). A run killed with SIGKILL
# cannot clean up: --clean-stale (also run at every start) removes
# namespaces named after pids that no longer exist.
#
# Needs root and iproute2 with netns support; without them it says so and
# exits 77.
set -u

IFNAME=wv0
GRACE_S=5  # how long COMMAND may take to stop after SIGTERM

prefix="weft-$$"
bridge_ns="$prefix-br"
subnet="10.77.$(($$ % 250 + 1))"
hosts=()
made=()     # namespaces created so far, removed in reverse order
child=""
hub=""      # delay_hub's pid (--wire-delay)
cleaned=0

die() {
  echo "netns.sh: $*" >&2
  exit 1
}

usage() {
  sed -n '4,6s/^# \{0,1\}//p' "$0" >&2
  exit 2
}

# Why namespaces cannot be made here (printed), or nothing (status 0).
unavailable() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "not root (uid $(id -u)): creating network namespaces needs root"
    return 1
  fi
  if ! command -v ip >/dev/null 2>&1; then
    echo "the ip command (iproute2) is not installed"
    return 1
  fi
  if ! ip netns list >/dev/null 2>&1; then
    echo "'ip netns' is not supported here: $(ip netns list 2>&1 | head -1)"
    return 1
  fi
  local probe="$prefix-probe" err
  if ! err=$(ip netns add "$probe" 2>&1); then
    echo "cannot create a network namespace: $err"
    return 1
  fi
  if ! err=$({ ip -n "$probe" link add br0 type bridge &&
    ip -n "$probe" link add pa type veth peer name pb; } 2>&1); then
    ip netns del "$probe" 2>/dev/null
    echo "cannot create a bridge or a veth pair in a namespace: $err"
    return 1
  fi
  if [ -n "$wire_delay" ] && [ ! -x "$hub_bin" ]; then
    ip netns del "$probe" 2>/dev/null
    echo "--wire-delay needs $hub_bin (make test builds it)"
    return 1
  fi
  if [ "$rails" -gt 1 ] && ! err=$(ip -n "$probe" rule add from 10.77.0.1 table 100 priority 1000 2>&1); then
    ip netns del "$probe" 2>/dev/null
    echo "--rails needs policy routing (ip rule) in a namespace: $err"
    return 1
  fi
  if [ "${#qdisc[@]}" -gt 0 ] && ! err=$(tc -n "$probe" qdisc add dev pa root "${qdisc[@]}" 2>&1); then
    ip netns del "$probe" 2>/dev/null
    echo "tc ${qdisc[0]} is not available in this kernel: ${err:-tc failed}"
    return 1
  fi
  ip netns del "$probe" 2>/dev/null
  return 0
}

# Kills whatever still runs inside a namespace, then removes it.
remove_ns() {
  local ns=$1 pids
  pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
  if [ -n "$pids" ]; then
    kill -KILL $pids 2>/dev/null  # one argument per pid
    sleep 0.2
  fi
  ip netns del "$ns" 2>/dev/null
}

clean_stale() {
  local ns pid
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    [[ $ns =~ ^weft-([0-9]+)-(br|probe|h[0-9]+)$ ]] || continue
    pid=${BASH_REMATCH[1]}
    [ "$pid" = "$$" ] && continue
    kill -0 "$pid" 2>/dev/null && continue  # that run is still going
    echo "netns.sh: removing $ns, left by process $pid" >&2
    remove_ns "$ns"
  done
}

cleanup() {
  [ "$cleaned" = 1 ] && return
  cleaned=1
  local i
  if [ -n "$hub" ]; then
    kill -TERM "$hub" 2>/dev/null
    wait "$hub" 2>/dev/null
    hub=""
  fi
  for ((i = ${#made[@]} - 1; i >= 0; i--)); do remove_ns "${made[i]}"; done
  made=()
}

on_signal() {  # signal number
  trap '' INT TERM HUP
  if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
    echo "netns.sh: signal $1: stopping the command (pid $child)" >&2
    kill -TERM "$child" 2>/dev/null
    local waited=0
    while kill -0 "$child" 2>/dev/null && [ "$waited" -lt $((GRACE_S * 10)) ]; do
      sleep 0.1
      waited=$((waited + 1))
    done
  fi
  cleanup
  exit $((128 + $1))
}

delay="" jitter="" loss="" rate="" wire_delay="" wire_loss=0 rails=1
hub_bin=${WEFT_BUILD_DIR:-$(dirname "$0")/../../build}/tests/multihost/delay_hub
qdisc=()  # the root qdisc of every host's wv0 and its parameters; empty: none

# Fills qdisc from the shaping options.
set_qdisc() {
  qdisc=()
  if [ -n "$delay$jitter$loss" ]; then
    qdisc=(netem)
    [ -n "$delay$jitter" ] && qdisc+=(delay "${delay:-0}ms")
    [ -n "$jitter" ] && qdisc+=("${jitter}ms")
    [ -n "$loss" ] && qdisc+=(loss "$loss%")
    [ -n "$rate" ] && qdisc+=(rate "$rate")
  elif [ -n "$rate" ]; then
    qdisc=(tbf rate "$rate" burst 64kb latency 100ms)
  fi
  return 0
}

is_number() { [[ $1 =~ ^[0-9]+(\.[0-9]+)?$ ]]; }

nhosts=2
mode=run
while [ $# -gt 0 ]; do
  case $1 in
    -k) [ $# -ge 2 ] || usage; nhosts=$2; shift 2 ;;
    --rails) [ $# -ge 2 ] && [[ $2 =~ ^[1-8]$ ]] || die "--rails needs a number of NICs from 1 to 8"; rails=$2; shift 2 ;;
    --delay) [ $# -ge 2 ] && is_number "$2" || die "--delay needs milliseconds"; delay=$2; shift 2 ;;
    --jitter) [ $# -ge 2 ] && is_number "$2" || die "--jitter needs milliseconds"; jitter=$2; shift 2 ;;
    --loss) [ $# -ge 2 ] && is_number "$2" || die "--loss needs a percentage"; loss=$2; shift 2 ;;
    --rate) [ $# -ge 2 ] && [[ $2 =~ ^[0-9]+(\.[0-9]+)?[kmgKMG]?(bit|bps)$ ]] ||
      die "--rate needs a tc rate such as 100mbit"
      rate=$2; shift 2 ;;
    --wire-delay) [ $# -ge 2 ] && is_number "$2" || die "--wire-delay needs milliseconds"; wire_delay=$2; shift 2 ;;
    --wire-loss) [ $# -ge 2 ] && is_number "$2" || die "--wire-loss needs a percentage"; wire_loss=$2; shift 2 ;;
    --check) mode=check; shift ;;
    --clean-stale) mode=clean; shift ;;
    -h | --help) usage ;;
    --) shift; break ;;
    *) echo "netns.sh: unknown argument '$1'" >&2; usage ;;
  esac
done

set_qdisc
[ -n "$wire_delay" ] && [ "${#qdisc[@]}" -gt 0 ] && die "--wire-delay does not combine with tc shaping"
[ -n "$wire_delay" ] && [ "$rails" -gt 1 ] && die "--wire-delay gives each host one NIC: not with --rails"
if [ "$mode" = check ]; then
  why=$(unavailable) || { echo "$why"; exit 77; }
  exit 0
fi
if [ "$mode" = clean ]; then
  unavailable >/dev/null || exit 0  # nothing can have been made here
  clean_stale
  exit 0
fi

[[ $nhosts =~ ^[0-9]+$ ]] && [ "$nhosts" -ge 1 ] && [ "$nhosts" -le 250 ] ||
  die "-k needs a number of hosts from 1 to 250"
[ $# -ge 1 ] || usage
if ! why=$(unavailable); then
  echo "netns.sh: skipped: $why" >&2
  exit 77
fi

trap cleanup EXIT
trap 'on_signal 1' HUP
trap 'on_signal 2' INT
trap 'on_signal 15' TERM

clean_stale

# ip in the namespace, with a message naming the step on failure.
in_ns() {  # namespace what args...
  local ns=$1 what=$2 err
  shift 2
  err=$(ip -n "$ns" "$@" 2>&1) || die "$what in $ns: $err"
}

# Rail r's device name and subnet (the first three octets).
rail_if() { if [ "$rails" -gt 1 ]; then echo "wv$1"; else echo "$IFNAME"; fi; }
rail_subnet() { echo "10.$((77 + $1)).$(($$ % 250 + 1))"; }

# One host's end: its namespace, its NICs (made by the caller), addresses,
# links up; with several rails, a routing table per NIC chosen by source.
host_up() {  # i
  local ns=${hosts[$1]} r dev addr net
  in_ns "$ns" "loopback up" link set lo up
  for ((r = 0; r < rails; r++)); do
    dev=$(rail_if "$r") net=$(rail_subnet "$r")
    addr=$net.$(($1 + 1))
    in_ns "$ns" "address" addr add "$addr/24" dev "$dev"
    in_ns "$ns" "$dev up" link set "$dev" up
    if [ "$rails" -gt 1 ]; then
      in_ns "$ns" "rail $r route" route add "$net.0/24" dev "$dev" src "$addr" table $((100 + r))
      in_ns "$ns" "rail $r gateway" route add default via "$net.254" dev "$dev" onlink table $((100 + r))
      in_ns "$ns" "rail $r rule" rule add from "$addr" table $((100 + r)) priority $((1000 + r))
    fi
    if [ "${#qdisc[@]}" -gt 0 ]; then
      err=$(tc -n "$ns" qdisc add dev "$dev" root "${qdisc[@]}" 2>&1) || die "tc ${qdisc[*]} in $ns: $err"
    fi
  done
}

addrs=()
for ((i = 0; i < nhosts; i++)); do
  ns="$prefix-h$i"
  ip netns add "$ns" || die "cannot create namespace $ns"
  made+=("$ns")
  hosts+=("$ns")
  addrs+=("$subnet.$((i + 1))")
done
if [ -n "$wire_delay" ]; then
  [ -x "$hub_bin" ] || die "--wire-delay needs $hub_bin (make test builds it)"
  ready=$(mktemp -u /tmp/weft-hub-XXXXXX) && mkfifo "$ready" || die "cannot make a fifo"
  us=$(awk -v ms="$wire_delay" 'BEGIN { printf "%d", ms * 1000 }')
  "$hub_bin" -d "$us" -l "$wire_loss" -i "$IFNAME" "${hosts[@]}" >"$ready" &
  hub=$!
  line=$(timeout 10 head -1 "$ready")
  rm -f "$ready"
  [ "$line" = ready ] || die "delay_hub did not start"
  via="delay_hub ($wire_delay ms each way${wire_loss:+, $wire_loss% loss})"
else
  ip netns add "$bridge_ns" || die "cannot create namespace $bridge_ns"
  made+=("$bridge_ns")
  in_ns "$bridge_ns" "loopback up" link set lo up
  for ((r = 0; r < rails; r++)); do
    in_ns "$bridge_ns" "bridge" link add "br$r" type bridge
    in_ns "$bridge_ns" "bridge up" link set "br$r" up
    for ((i = 0; i < nhosts; i++)); do
      port=h$i
      [ "$r" -gt 0 ] && port=h${i}r$r
      in_ns "$bridge_ns" "veth pair for host $i" link add "$port" type veth peer name "$(rail_if "$r")" netns "${hosts[i]}"
      in_ns "$bridge_ns" "bridge port $port" link set "$port" master "br$r"
      in_ns "$bridge_ns" "bridge port $port up" link set "$port" up
    done
    if [ "$rails" -gt 1 ]; then  # the spine: the bridge namespace routes between rails
      in_ns "$bridge_ns" "rail $r gateway" addr add "$(rail_subnet "$r").254/24" dev "br$r"
    fi
  done
  if [ "$rails" -gt 1 ]; then
    err=$(ip netns exec "$bridge_ns" sh -c 'echo 1 >/proc/sys/net/ipv4/ip_forward' 2>&1) ||
      die "forwarding in $bridge_ns: $err"
  fi
  via=$bridge_ns
fi
for ((i = 0; i < nhosts; i++)); do host_up "$i"; done
# Every NIC must be up (both ends of a veth) before anyone binds to an address.
for ns in "${hosts[@]}"; do
  for ((r = 0; r < rails; r++)); do
    dev=$(rail_if "$r")
    for ((w = 0; w < 50; w++)); do
      ip -n "$ns" -o link show "$dev" | grep -q 'LOWER_UP' && break
      sleep 0.1
    done
    ip -n "$ns" -o link show "$dev" | grep -q 'LOWER_UP' || die "$dev in $ns did not come up"
  done
done

subnets=()
for ((r = 0; r < rails; r++)); do subnets+=("$(rail_subnet "$r")"); done
nets=$(printf '%s.0/24 ' "${subnets[@]}")
echo "netns.sh: $nhosts hosts (${hosts[*]}) on ${nets% } via $via${qdisc[0]:+, shaped: ${qdisc[*]}}" >&2
mh_ifname=$IFNAME
[ "$rails" -gt 1 ] && mh_ifname=wv
export WEFT_MH_HOSTS="${hosts[*]}" WEFT_MH_ADDRS="${addrs[*]}" WEFT_MH_IFNAME=$mh_ifname WEFT_MH_RAILS=$rails \
  WEFT_MH_RAIL_SUBNETS="${subnets[*]}"
"$@" &
child=$!
wait "$child"
status=$?
child=""
exit "$status"
