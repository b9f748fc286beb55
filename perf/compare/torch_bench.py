#!/usr/bin/python3
"""gloo_bench.py - Gloo (torch.distributed, backend "gloo") twin of weft's
nccl-tests-style benchmarks, for the comparison in perf/compare/.

Same conventions as mpi_coll_bench.c and nccl-tests: float32, sum, root 0;
sizes -b/-e/-f with K/M/G = powers of 1024; per-rank chunks of allgather,
reducescatter and alltoall rounded down to a multiple of 16 bytes; time =
wall time of ITERS back-to-back calls / ITERS after WARMUP untimed calls,
maximum over ranks; buffers are allocated for the largest size and call i
works on the region at offset (i mod (MAX / size)) * size, as nccl-tests
rotates its buffers; busbw = size/time * 2(n-1)/n (allreduce), (n-1)/n
(allgather, reducescatter, alltoall), 1 (broadcast).

torch.distributed's all_reduce and broadcast work in place (the API has no
out-of-place form); allgather and alltoall are out of place. A collective
that the gloo backend does not implement prints one "UNSUPPORTED" line and
the program exits 0.

Usage (starts NRANKS processes on this host, rendezvous on 127.0.0.1):
  gloo_bench.py -np NRANKS -c COLL [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP]
Output: '#' comments, then per size
  RESULT coll=allreduce nranks=2 size=1024 count=256 time_us=12.3 algbw=0.08 busbw=0.08 wrong=0
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import time

COLLS = ("allreduce", "allgather", "reducescatter", "broadcast", "alltoall")


def parse_size(text):
    """'64K' -> 65536 (powers of 1024, like nccl-tests)."""
    t = text.strip().upper().rstrip("B")
    mul = 1
    if t and t[-1] in "KMG":
        mul = 1024 ** ("KMG".index(t[-1]) + 1)
        t = t[:-1]
    if not t.isdigit():
        raise argparse.ArgumentTypeError("bad size: %r" % text)
    return int(t) * mul


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-np", dest="nranks", type=int, default=2)
    p.add_argument("-c", dest="coll", choices=COLLS, default="allreduce")
    p.add_argument("-b", dest="min_bytes", type=parse_size, default=8)
    p.add_argument("-e", dest="max_bytes", type=parse_size, default=64 << 20)
    p.add_argument("-f", dest="factor", type=int, default=2)
    p.add_argument("-n", dest="iters", type=int, default=20)
    p.add_argument("-w", dest="warmup", type=int, default=5)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.nranks < 1 or a.factor < 2 or a.iters < 1 or a.warmup < 0 or a.min_bytes > a.max_bytes:
        p.error("need -np >= 1, -f >= 2, -n >= 1, -w >= 0, -b <= -e")
    return a


def sizes(a):
    s = a.min_bytes
    while s <= a.max_bytes:
        yield s
        if s == 0:
            break
        s *= a.factor


def counts_for(coll, nbytes, n):
    """(param, send, recv) element counts, rounded as nccl-tests does."""
    count = nbytes // 4
    if coll in ("allreduce", "broadcast"):
        return count, count, count
    base = (count // n) & ~3  # multiple of 16 bytes of float
    if coll == "allgather":
        return base, base, base * n
    if coll == "reducescatter":
        return base, base * n, base
    return base, base * n, base * n  # alltoall


def bus_factor(coll, n):
    if coll == "allreduce":
        return 2.0 * (n - 1) / n
    if coll == "broadcast":
        return 1.0
    return (n - 1) / n


# ---------------------------------------------------------------- worker ---

def worker(a):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=n)

    def inputs(r, count, offset=0):
        idx = torch.arange(offset, offset + count, dtype=torch.int64) % 13 + 1
        return (idx * (r + 1)).to(torch.float32)

    def make_op(coll, send, recv, param):
        if coll == "allreduce":
            return lambda: dist.all_reduce(send, op=dist.ReduceOp.SUM)
        if coll == "broadcast":
            return lambda: dist.broadcast(send, src=0)
        if coll == "allgather":
            if hasattr(dist, "all_gather_into_tensor"):
                try:  # one flat output, if this backend implements it
                    dist.all_gather_into_tensor(recv, send)
                    api_used[0] = "all_gather_into_tensor"
                    return lambda: dist.all_gather_into_tensor(recv, send)
                except RuntimeError:
                    pass
            views = list(recv.split(param)) if param else [recv[:0] for _ in range(n)]
            api_used[0] = "all_gather (into views of one tensor)"
            return lambda: dist.all_gather(views, send)
        if coll == "reducescatter":
            if hasattr(dist, "reduce_scatter_tensor"):
                try:
                    dist.reduce_scatter_tensor(recv, send, op=dist.ReduceOp.SUM)
                    api_used[0] = "reduce_scatter_tensor"
                    return lambda: dist.reduce_scatter_tensor(recv, send, op=dist.ReduceOp.SUM)
                except RuntimeError:
                    pass
            chunks = list(send.split(param)) if param else [send[:0] for _ in range(n)]
            dist.reduce_scatter(recv, chunks, op=dist.ReduceOp.SUM)  # raises if unsupported
            api_used[0] = "reduce_scatter"
            return lambda: dist.reduce_scatter(recv, chunks, op=dist.ReduceOp.SUM)
        return lambda: dist.all_to_all_single(recv, send)  # alltoall

    api_used = [{"allreduce": "all_reduce (in place)", "broadcast": "broadcast (in place)",
                 "alltoall": "all_to_all_single"}.get(a.coll, "")]

    def count_wrong(coll, send, recv, param):
        tri = float(n * (n + 1) // 2)
        if coll == "allreduce":
            exp = inputs(0, param) * tri
            return int((send != exp).sum())
        if coll == "broadcast":
            return int((send != inputs(0, param)).sum())
        if coll == "allgather":
            exp = torch.cat([inputs(r, param) for r in range(n)])
            return int((recv != exp).sum())
        if coll == "reducescatter":
            exp = inputs(0, param, rank * param) * tri
            return int((recv != exp).sum())
        exp = torch.cat([inputs(r, param, rank * param) for r in range(n)])
        return int((recv != exp).sum())

    if rank == 0:
        print("# gloo_bench coll=%s nranks=%d iters=%d warmup=%d" % (a.coll, n, a.iters, a.warmup))
        print("# library: torch %s, backend gloo (TCP over loopback)" % torch.__version__)
        print("# time: wall time of %d back-to-back calls / %d, max over ranks; allreduce and "
              "broadcast in place (torch API)" % (a.iters, a.iters))
        sys.stdout.flush()

    # Buffers for the largest size, every page touched before any timing.
    big_total = max(max(counts_for(a.coll, nb, n)[1:]) for nb in sizes(a))
    big_send = torch.zeros(big_total + 1, dtype=torch.float32)
    big_recv = torch.zeros(big_total + 1, dtype=torch.float32)

    for nbytes in sizes(a):
        param, nsend, nrecv = counts_for(a.coll, nbytes, n)
        if a.coll == "allgather" and param == 0:
            # gloo's allgather divides by the element count: SIGFPE on 0.
            if rank == 0:
                print("SKIPPED coll=%s nranks=%d size=0 reason=gloo_allgather_crashes_on_0_elements"
                      % (a.coll, n))
            continue
        # nccl-tests' rotation: call i uses the region at (i mod steps) * total.
        total = max(nsend, nrecv)
        steps = max(1, min(big_total // total if total else 1, a.warmup + a.iters))
        send = big_send[:nsend]
        recv = big_recv[:nrecv]
        send.copy_(inputs(rank, nsend))
        recv.fill_(-1.0)
        try:
            op = make_op(a.coll, send, recv, param)
            ops = [op] + [make_op(a.coll, big_send[k * total:k * total + nsend],
                                  big_recv[k * total:k * total + nrecv], param)
                          for k in range(1, steps)]
        except RuntimeError as e:
            if rank == 0:
                msg = str(e).splitlines()[0] if str(e) else type(e).__name__
                print("UNSUPPORTED coll=%s nranks=%d reason=%s" % (a.coll, n, msg.replace(" ", "_")))
            break
        if rank == 0 and api_used[0] and len(api_used) == 1:  # once, at the first size
            print("# api: torch.distributed.%s" % api_used[0])
            api_used.append("shown")
        for i in range(a.warmup):
            ops[i % steps]()
        dist.barrier()
        t0 = time.perf_counter()
        for i in range(a.iters):
            ops[i % steps]()
        dt = torch.tensor([(time.perf_counter() - t0) / a.iters], dtype=torch.float64)
        dist.all_reduce(dt, op=dist.ReduceOp.MAX)

        # Check one fresh call (the timed loop ran in place on some buffers).
        send.copy_(inputs(rank, nsend))
        recv.fill_(-1.0)
        if a.coll == "broadcast" and rank != 0:
            send.fill_(-1.0)
        op()
        wrong = torch.tensor([count_wrong(a.coll, send, recv, param)], dtype=torch.int64)
        dist.all_reduce(wrong, op=dist.ReduceOp.SUM)
        if rank == 0:
            size = max(nsend, nrecv) * 4
            t = float(dt[0])
            algbw = size / t / 1e9 if t > 0 else 0.0
            print("RESULT coll=%s nranks=%d size=%d count=%d time_us=%.2f algbw=%.4f busbw=%.4f "
                  "wrong=%d" % (a.coll, n, size, param, t * 1e6, algbw,
                                algbw * bus_factor(a.coll, n), int(wrong[0])))
            sys.stdout.flush()
    dist.barrier()
    dist.destroy_process_group()
    return 0


# -------------------------------------------------------------- launcher ---

def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(a, argv):
    env = dict(os.environ)
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(a.nranks),
               GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    procs = []
    for r in range(a.nranks):
        env_r = dict(env, RANK=str(r), LOCAL_RANK=str(r))
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"] + argv,
                                      env=env_r,
                                      stdin=subprocess.DEVNULL if r else None))

    def stop(signum, _frame):
        for p in procs:
            if p.poll() is None:
                p.terminate()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    rc = 0
    pending = list(procs)
    while pending:  # stop everyone as soon as one rank fails
        for p in list(pending):
            code = p.poll()
            if code is None:
                continue
            pending.remove(p)
            if code != 0 and rc == 0:
                rc = code if code > 0 else 128 - code
                for q in pending:
                    q.terminate()
        time.sleep(0.05)
    return rc


def main():
    argv = sys.argv[1:]
    a = parse_args(argv)
    if a.worker:
        return worker(a)
    return launch(a, [x for x in argv if x != "--worker"])


if __name__ == "__main__":
    sys.exit(main())
