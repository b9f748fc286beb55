#!/usr/bin/python3
"""torch_bench.py - collectives through torch.distributed, on any CPU
backend: "gloo" (perf/compare/run.sh's Gloo peer) or "weft" (weft_torch,
from `make torch`), the twin of weft's nccl-tests-style benchmarks and of
mpi_coll_bench.c, plus a DDP training step and a tensor-parallel one.

Same conventions as mpi_coll_bench.c and nccl-tests: float32 (or --dtype
bfloat16, half = torch.float16, double = torch.float64), sum, root 0;
sizes -b/-e/-f with K/M/G = powers of 1024; per-rank chunks of allgather,
reducescatter and alltoall rounded down to a multiple of 16 bytes; time =
wall time of ITERS back-to-back calls / ITERS after WARMUP untimed calls,
maximum over ranks; buffers are allocated for the largest size and call i
works on the region at offset (i mod (MAX / size)) * size, as nccl-tests
rotates its buffers; busbw = size/time * 2(n-1)/n (allreduce), (n-1)/n
(allgather, reducescatter, alltoall), 1 (broadcast). With -T SECONDS the
iteration count of each size is chosen instead so that its timed loop
lasts about SECONDS (at least 5 calls; the slowest rank's estimate from
three calls after the warm-up), so that every size reaches its steady
state in bounded time.

torch.distributed's all_reduce and broadcast work in place (the API has no
out-of-place form); allgather and alltoall are out of place. Every call is
a blocking one (async_op=False), as a training script makes it. A
collective that the backend does not implement, or not for --dtype, prints
one "UNSUPPORTED" line and the program exits 0. Inputs are small integers,
exact in every type; the check compares exactly, except that bfloat16 and
half sums may round their partial sums (above 256 and 2048), so there an
element is wrong when it is off by more than nranks units in the last place.

-c ddp times DistributedDataParallel training steps instead (forward,
backward with DDP's bucketed all_reduce, SGD step) of a small transformer
language model (--ddp-layers, --ddp-width, fixed seed, --ddp-batch
sequences of 64 tokens per rank, 4 unless set): after WARMUP steps, the median of ITERS steps' times, max over
ranks; the RESULT line's size is the model's parameter bytes. With
--ddp-no-sync the steps run under DDP's no_sync() (no gradient all_reduce
at all): the compute alone, with every rank busy, the bound on what any
backend's step time can approach.

-c tp times a tensor-parallel transformer block over all ranks (torch 2.x:
DTensor on a CPU DeviceMesh, parallelize_module as Megatron splits it: the
attention's q, k and v projections and the MLP's first layer
ColwiseParallel, the attention's output projection and the MLP's second
layer RowwiseParallel), width --tp-width with --tp-heads heads and an MLP
of 4 x width, fixed seed, the same --tp-tokens tokens (sequences of 64) on
every rank: after WARMUP steps (at least one, the checked one), the median
of ITERS steps (forward, loss, backward, zero grads), max over ranks; the RESULT line's size is the
block's parameter bytes, wrong=1 when the first step's loss is not the
unsharded block's (on rank 0) within 1e-5. A step makes 6 all_reduces of
tokens x width floats: the outputs of both RowwiseParallel layers, then in
the backward pass the input gradients of the 4 ColwiseParallel ones. torch
1.13 has no DeviceMesh: UNSUPPORTED.

Usage (starts NRANKS processes on this host, rendezvous on 127.0.0.1):
  torch_bench.py [--backend gloo|weft] -np NRANKS -c COLL [-b MIN] [-e MAX] [-f FACTOR]
                 [-n ITERS | -T SECONDS] [-w WARMUP] [--dtype float|bfloat16|half|double]
  torch_bench.py ... -c ddp [--ddp-layers L] [--ddp-width W] [--ddp-batch B] [--ddp-no-sync]
  torch_bench.py ... -c tp [--tp-width W] [--tp-heads H] [--tp-tokens T]
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

COLLS = ("allreduce", "allgather", "reducescatter", "broadcast", "alltoall", "ddp", "tp")
BACKENDS = ("gloo", "weft")
# --dtype, named as weft's *_perf -d names them: (torch dtype name, bytes, relative
# tolerance of the check: the type's unit in the last place for a sum of small integers).
DTYPES = {"float": ("float32", 4, 0.0), "bfloat16": ("bfloat16", 2, 2.0 ** -8),
          "half": ("float16", 2, 2.0 ** -11), "double": ("float64", 8, 0.0)}


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
    p.add_argument("--backend", choices=BACKENDS, default="gloo")
    p.add_argument("-np", dest="nranks", type=int, default=2)
    p.add_argument("-c", dest="coll", choices=COLLS, default="allreduce")
    p.add_argument("-b", dest="min_bytes", type=parse_size, default=8)
    p.add_argument("-e", dest="max_bytes", type=parse_size, default=64 << 20)
    p.add_argument("-f", dest="factor", type=int, default=2)
    p.add_argument("-n", dest="iters", type=int, default=20)
    p.add_argument("-w", dest="warmup", type=int, default=5)
    p.add_argument("-T", dest="budget_s", type=float, default=0.0)
    p.add_argument("--dtype", choices=tuple(DTYPES), default="float")
    p.add_argument("--ddp-layers", type=int, default=2)
    p.add_argument("--ddp-width", type=int, default=256)
    p.add_argument("--ddp-batch", type=int, default=4)
    p.add_argument("--ddp-no-sync", action="store_true")
    p.add_argument("--tp-width", type=int, default=256)
    p.add_argument("--tp-heads", type=int, default=4)
    p.add_argument("--tp-tokens", type=int, default=256)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if (a.nranks < 1 or a.factor < 2 or a.iters < 1 or a.warmup < 0 or a.min_bytes > a.max_bytes
            or a.budget_s < 0 or a.ddp_layers < 1 or a.ddp_width < 8 or a.ddp_width % 4 or a.ddp_batch < 1):
        p.error("need -np >= 1, -f >= 2, -n >= 1, -w >= 0, -b <= -e, -T >= 0, --ddp-layers >= 1, "
                "--ddp-width a multiple of 4 from 8, --ddp-batch >= 1")
    if a.coll == "tp" and (a.tp_heads < 1 or a.tp_heads % a.nranks or a.tp_width % a.tp_heads
                           or a.tp_tokens < 1 or a.tp_tokens % min(64, a.tp_tokens)):
        p.error("-c tp needs --tp-heads a multiple of -np, --tp-width a multiple of --tp-heads, "
                "--tp-tokens a multiple of 64 (or fewer)")
    return a


def sizes(a):
    s = a.min_bytes
    while s <= a.max_bytes:
        yield s
        if s == 0:
            break
        s *= a.factor


def counts_for(coll, nbytes, n, elt=4):
    """(param, send, recv) element counts of elt-byte elements, rounded as nccl-tests does."""
    count = nbytes // elt
    if coll in ("allreduce", "broadcast"):
        return count, count, count
    base = (count // n) & ~(16 // elt - 1)  # multiple of 16 bytes
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

BACKEND_TEXT = {"gloo": "gloo (TCP over loopback)",
                "weft": "weft (weft_torch: shared memory on one host)"}


def iters_for_budget(budget_s, ops, steps, torch, dist):
    """Calls that fill about budget_s: three timed calls, the slowest rank's."""
    t0 = time.perf_counter()
    for i in range(3):
        ops[i % steps]()
    est = torch.tensor([(time.perf_counter() - t0) / 3], dtype=torch.float64)
    dist.all_reduce(est, op=dist.ReduceOp.MAX)
    return int(max(5, min(20000, budget_s / max(float(est[0]), 1e-7))))


def ddp_worker(a, torch, dist, rank, n):
    """Median DDP step time of a small transformer language model."""
    import contextlib
    import statistics
    from torch import nn

    vocab, seq, batch = 4096, 64, a.ddp_batch
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=a.ddp_width, nhead=4, dim_feedforward=4 * a.ddp_width,
                                       dropout=0.0, batch_first=True)
    model = nn.Sequential(nn.Embedding(vocab, a.ddp_width), nn.TransformerEncoder(layer, a.ddp_layers),
                          nn.Linear(a.ddp_width, vocab))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    params = sum(p.numel() for p in model.parameters())
    gen = torch.Generator().manual_seed(1000 + rank)
    data = [torch.randint(0, vocab, (batch, seq + 1), generator=gen) for _ in range(4)]
    loss_fn = nn.CrossEntropyLoss()

    def step(i):
        x = data[i % len(data)]
        opt.zero_grad()
        with ddp.no_sync() if a.ddp_no_sync else contextlib.nullcontext():
            out = ddp(x[:, :-1])
            loss = loss_fn(out.reshape(-1, vocab), x[:, 1:].reshape(-1))
            loss.backward()
        opt.step()

    if rank == 0:
        print("# torch_bench coll=ddp nranks=%d steps=%d warmup=%d" % (n, a.iters, a.warmup))
        print("# library: torch %s, backend %s" % (torch.__version__, BACKEND_TEXT[a.backend]))
        print("# model: embedding %d, %d transformer layers of width %d, head; %d parameters (%.1f MB fp32); "
              "batch %d x %d tokens per rank; time: median step, max over ranks"
              % (vocab, a.ddp_layers, a.ddp_width, params, params * 4 / 1e6, batch, seq))
        sys.stdout.flush()
    for i in range(a.warmup):
        step(i)
    times = []
    for i in range(a.iters):
        dist.barrier()
        t0 = time.perf_counter()
        step(i)
        times.append(time.perf_counter() - t0)
    dt = torch.tensor([statistics.median(times)], dtype=torch.float64)
    dist.all_reduce(dt, op=dist.ReduceOp.MAX)
    # Every rank must hold the same parameters after the steps (unless no
    # gradient was ever reduced).
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    ref = flat.clone()
    dist.broadcast(ref, src=0)
    wrong = torch.tensor([0 if a.ddp_no_sync else int((flat != ref).sum())], dtype=torch.int64)
    dist.all_reduce(wrong, op=dist.ReduceOp.SUM)
    if rank == 0:
        t = float(dt[0])
        print("RESULT coll=ddp%s nranks=%d batch=%d size=%d count=%d time_us=%.2f algbw=%.4f busbw=%.4f wrong=%d iters=%d"
              % ("_nosync" if a.ddp_no_sync else "", n, batch, params * 4, params, t * 1e6, params * 4 / t / 1e9, 0.0, int(wrong[0]), a.iters))
        sys.stdout.flush()
    dist.barrier()
    # Not destroy_process_group: torch 1.13's ProcessGroupGloo destructor
    # joins its worker threads holding the GIL while one of them waits for
    # the GIL to free a DDP tensor, and the process never exits.
    sys.stderr.flush()
    os._exit(0)

def tp_worker(a, torch, dist, rank, n):
    """Median step time of a tensor-parallel transformer block."""
    import copy
    import statistics
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    width, heads, ff = a.tp_width, a.tp_heads, 4 * a.tp_width
    seq = min(64, a.tp_tokens)
    batch = a.tp_tokens // seq

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.wq, self.wk, self.wv, self.wo = (nn.Linear(width, width) for _ in range(4))

        def forward(self, x):
            b, s = x.shape[0], x.shape[1]
            # -1 heads: each rank holds heads / n of them.
            q, k, v = (w(x).view(b, s, -1, width // heads).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
            y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.wo(y.transpose(1, 2).reshape(b, s, -1))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.attn, self.norm2 = nn.LayerNorm(width), Attention(), nn.LayerNorm(width)
            self.fc1, self.fc2 = nn.Linear(width, ff), nn.Linear(ff, width)

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            return x + self.fc2(nn.functional.gelu(self.fc1(self.norm2(x))))

    import warnings
    warnings.filterwarnings("ignore", message="DTensor random operators")  # none in this block
    mesh = init_device_mesh("cpu", (n,))
    torch.manual_seed(0)  # the same block and input on every rank
    ref = Block()
    plan = {"attn.wq": ColwiseParallel(), "attn.wk": ColwiseParallel(), "attn.wv": ColwiseParallel(),
            "attn.wo": RowwiseParallel(), "fc1": ColwiseParallel(), "fc2": RowwiseParallel()}
    model = parallelize_module(copy.deepcopy(ref), mesh, plan)
    x = torch.randn(batch, seq, width)
    params = sum(p.numel() for p in ref.parameters())

    def step():
        loss = model(x).pow(2).mean()
        loss.backward()
        model.zero_grad(set_to_none=True)
        return loss

    if rank == 0:
        print("# torch_bench coll=tp nranks=%d steps=%d warmup=%d" % (n, a.iters, a.warmup))
        print("# library: torch %s, backend %s" % (torch.__version__, BACKEND_TEXT[a.backend]))
        print("# model: one transformer block of width %d, %d heads, MLP %d, tensor-parallel over %d ranks "
              "(q, k, v, fc1 colwise; out, fc2 rowwise); %d parameters (%.1f MB fp32); %d x %d tokens, "
              "the same on every rank; time: median step, max over ranks"
              % (width, heads, ff, n, params, params * 4 / 1e6, batch, seq))
        sys.stdout.flush()
    loss = float(step())
    bad = 0
    if rank == 0:  # the unsharded block's loss
        want = float(ref(x).pow(2).mean())
        bad = int(abs(loss - want) > 1e-5 * max(1.0, abs(want)))
    for i in range(max(0, a.warmup - 1)):
        step()
    times = []
    for i in range(a.iters):
        dist.barrier()
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    dt = torch.tensor([statistics.median(times)], dtype=torch.float64)
    dist.all_reduce(dt, op=dist.ReduceOp.MAX)
    wrong = torch.tensor([bad], dtype=torch.int64)
    dist.all_reduce(wrong, op=dist.ReduceOp.SUM)
    if rank == 0:
        t = float(dt[0])
        print("RESULT coll=tp nranks=%d batch=%d size=%d count=%d time_us=%.2f algbw=%.4f busbw=%.4f wrong=%d iters=%d"
              % (n, batch, params * 4, params, t * 1e6, params * 4 / t / 1e9, 0.0, int(wrong[0]), a.iters))
        sys.stdout.flush()
    dist.barrier()
    dist.destroy_process_group()
    return 0


def worker(a):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if a.backend == "weft":
        import weft_torch  # noqa: F401  (registers the backend; PYTHONPATH=build/python)
    if a.coll == "tp":
        try:
            import torch.distributed.device_mesh  # noqa: F401
            import torch.distributed.tensor.parallel  # noqa: F401
        except ImportError as e:
            if rank == 0:
                print("UNSUPPORTED coll=tp nranks=%d reason=torch_%s_has_no_DeviceMesh_(%s)"
                      % (n, torch.__version__, str(e).replace(" ", "_")))
            return 0
    dist.init_process_group(a.backend, init_method="env://", rank=rank, world_size=n)
    if a.coll == "ddp":
        return ddp_worker(a, torch, dist, rank, n)
    if a.coll == "tp":
        return tp_worker(a, torch, dist, rank, n)

    tname, elt, tol = DTYPES[a.dtype]
    dtype = getattr(torch, tname)

    def inputs(r, count, offset=0, dt=dtype):
        idx = torch.arange(offset, offset + count, dtype=torch.int64) % 13 + 1
        return (idx * (r + 1)).to(dt)

    def differ(got, exp):
        """Elements of got that are not exp (exactly, or within the type's tolerance)."""
        if not tol:
            return int((got != exp).sum())
        exp = exp.to(torch.float64)
        return int(((got.to(torch.float64) - exp).abs() > tol * n * exp.abs()).sum())

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
        # Sums are formed in float64 for the low-precision types (exact), then compared.
        sdt = dtype if not tol else torch.float64
        if coll == "allreduce":
            return differ(send, inputs(0, param, dt=sdt) * tri)
        if coll == "broadcast":
            return differ(send, inputs(0, param))
        if coll == "allgather":
            return differ(recv, torch.cat([inputs(r, param) for r in range(n)]))
        if coll == "reducescatter":
            return differ(recv, inputs(0, param, rank * param, dt=sdt) * tri)
        return differ(recv, torch.cat([inputs(r, param, rank * param) for r in range(n)]))

    if rank == 0:
        print("# torch_bench coll=%s dtype=%s nranks=%d iters=%s warmup=%d" %
              (a.coll, a.dtype, n, "%.2f s per size" % a.budget_s if a.budget_s else a.iters, a.warmup))
        print("# library: torch %s, backend %s" % (torch.__version__, BACKEND_TEXT[a.backend]))
        print("# time: wall time of the back-to-back calls / their count, max over ranks; allreduce and "
              "broadcast in place (torch API)")
        sys.stdout.flush()

    probing = [False]
    # Buffers for the largest size, every page touched before any timing.
    big_total = max(max(counts_for(a.coll, nb, n, elt)[1:]) for nb in sizes(a))
    big_send = torch.zeros(big_total + 1, dtype=dtype)
    big_recv = torch.zeros(big_total + 1, dtype=dtype)

    for nbytes in sizes(a):
        param, nsend, nrecv = counts_for(a.coll, nbytes, n, elt)
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
            if a.dtype != "float":
                probing[0] = True
                op()  # a backend without this type raises here, on every rank alike
                probing[0] = False
        except RuntimeError as e:
            if rank == 0:
                msg = str(e).splitlines()[0] if str(e) else type(e).__name__
                if probing[0]:
                    msg += " (dtype %s)" % a.dtype
                print("UNSUPPORTED coll=%s nranks=%d reason=%s" % (a.coll, n, msg.replace(" ", "_")))
                sys.stdout.flush()
            if probing[0]:
                # The failed call leaves gloo's queue in error: a barrier now
                # raises it again. Every rank failed alike; leave without one.
                sys.stderr.flush()
                os._exit(0)
            break
        if rank == 0 and api_used[0] and len(api_used) == 1:  # once, at the first size
            print("# api: torch.distributed.%s" % api_used[0])
            api_used.append("shown")
        for i in range(a.warmup):
            ops[i % steps]()
        iters = a.iters if not a.budget_s else iters_for_budget(a.budget_s, ops, steps, torch, dist)
        dist.barrier()
        t0 = time.perf_counter()
        for i in range(iters):
            ops[i % steps]()
        dt = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
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
            size = max(nsend, nrecv) * elt
            t = float(dt[0])
            algbw = size / t / 1e9 if t > 0 else 0.0
            print("RESULT coll=%s nranks=%d size=%d count=%d time_us=%.2f algbw=%.4f busbw=%.4f "
                  "wrong=%d iters=%d" % (a.coll, n, size, param, t * 1e6, algbw,
                                         algbw * bus_factor(a.coll, n), int(wrong[0]), iters))
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
    # USE_LIBUV=0: torch 2.x's env:// store asks for libuv, which Debian 13's torch 2.6 lacks.
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(a.nranks),
               GLOO_SOCKET_IFNAME="lo", NCCL_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", USE_LIBUV="0")
    if a.backend == "weft":  # weft_torch as `make torch` builds it
        build = os.environ.get("WEFT_BUILD_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build"))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.join(build, "python"), env.get("PYTHONPATH")) if p)
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
