"""test_two_hosts.py — backend "weft" across two hosts: two network
namespaces joined by veth pairs through a bridge (tests/multihost/netns.sh
makes them and removes them), each process tree in its own UTS namespace
with its own host name, so weft sees two hosts and ranks on different
ones use the network transport. Each host runs torchrun with two ranks and
a static rendezvous on host 0's address (as on two real machines); the job
(two_hosts_job.py) checks its results against Gloo's. Skipped, saying
why, where namespaces cannot be made (not root, no iproute2 netns) or
torchrun cannot start (Debian 13's torch 2.6: compat.torchrun_store_error).
"""
import os
import re
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("torch")
from compat import torchrun_store_error  # noqa: E402
HERE = os.path.dirname(os.path.abspath(__file__))
NETNS = os.path.join(HERE, "..", "multihost", "netns.sh")

# Run by netns.sh in the caller's namespace: one torchrun per host, each in
# its namespace under its own host name.
LAUNCH = r'''
read -r -a hosts <<<"$WEFT_MH_HOSTS"
read -r -a addrs <<<"$WEFT_MH_ADDRS"
pids=()
for i in 0 1; do
  ip netns exec "${hosts[i]}" unshare --uts sh -c 'hostname "$0" && exec "$@"' "weft-torch-host$i" \
    env NCCL_SOCKET_IFNAME="$WEFT_MH_IFNAME" GLOO_SOCKET_IFNAME="$WEFT_MH_IFNAME" \
    "$PYTHON" -m torch.distributed.run --nnodes 2 --nproc_per_node 2 --node_rank "$i" \
      --master_addr "${addrs[0]}" --master_port 29517 --redirects 1 --tee 1 "$JOB" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
exit $rc
'''


def unavailable():
    why = torchrun_store_error()
    if why is not None:
        return f"torchrun cannot make its rendezvous store in this torch (with gloo as well): {why}"
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    check = subprocess.run([NETNS, "--check"], capture_output=True, text=True)
    return None if check.returncode == 0 else check.stdout.strip() or "netns.sh --check failed"


def test_two_hosts_two_ranks_each():
    why = unavailable()
    if why:
        pytest.skip(why)
    env = dict(os.environ, PYTHON=sys.executable, JOB=os.path.join(HERE, "two_hosts_job.py"), WEFT_TIMEOUT="60", WEFT_TIMEOUT_FAIL="1",
               OMP_NUM_THREADS="1", NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="NET")
    # timeout(1) sends SIGTERM, on which netns.sh stops the job and removes the namespaces.
    out = subprocess.run(["timeout", "150", NETNS, "-k", "2", "--", "bash", "-c", LAUNCH], env=env,
                         capture_output=True, text=True)
    log = out.stdout + out.stderr
    assert out.returncode == 0, log
    for r in range(4):
        assert f"rank {r} ok on weft-torch-host{r // 2}" in out.stdout, log
    # weft's own account: every rank's connections went over the network.
    for r in range(4):
        assert re.search(rf"rank {r}: \d+ network connections over", log), log
