#!/usr/bin/env bash
# netns_agent.sh HOST COMMAND... — Open MPI's remote-start agent
# (--mca plm_rsh_agent) for the namespace "hosts" of tests/multihost/netns.sh:
# where mpirun would ssh to HOST (one of WEFT_MH_ADDRS), run COMMAND in that
# host's namespace (the same position in WEFT_MH_HOSTS) instead. Used by
# net_run.sh to run Open MPI across the same namespaces as weft.
set -u
host=${1:?usage: netns_agent.sh HOST COMMAND...}
shift
read -r -a hosts <<<"${WEFT_MH_HOSTS:?not inside netns.sh}"
read -r -a addrs <<<"${WEFT_MH_ADDRS:?not inside netns.sh}"
for i in "${!addrs[@]}"; do
  # mpirun hands the remote command over as ssh would: words for a shell.
  [ "${addrs[$i]}" = "$host" ] && exec ip netns exec "${hosts[$i]}" sh -c "$*"
done
echo "netns_agent.sh: $host is none of the namespace hosts ($WEFT_MH_ADDRS)" >&2
exit 1
