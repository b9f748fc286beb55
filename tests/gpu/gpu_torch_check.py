#!/usr/bin/env python3
"""gpu_torch_check.py - torch.distributed over NCCL (or weft), checked.

What: starts 2 processes (torch.multiprocessing, rendezvous on 127.0.0.1)
that run all_reduce sum/avg/max, all_gather_into_tensor,
reduce_scatter_tensor, broadcast, send/recv, all_to_all_single, barrier
and 3 steps of a small DistributedDataParallel model, each against values
computed in closed form (DDP against a one-process replay of the same 3
steps). Prints one line per check and a summary line; --out writes the
results, and --compare A B says whether two runs got the same numbers.

Why: this is PyTorch's ProcessGroupNCCL on weft. tests/gpu/gpu_check.sh runs
it once with NVIDIA's NCCL and once with LD_PRELOAD of weft's
libnccl.so.2 on a GPU machine, then --compare's the two. On a machine
without a GPU, `--backend gloo --device cpu` runs the same logic on CPU
tensors (calls gloo lacks are emulated and say so), which `make test`
uses to keep the script honest.

Usage:
  gpu_torch_check.py [--backend nccl|gloo] [--device cuda|cpu] [--nranks 2]
                     [--large N] [--timeout S] [--out FILE.json]
  gpu_torch_check.py --compare REF.json TEST.json
Exit status: 0 if every check passed (or --compare found them equal), 1 otherwise.
"""
import argparse
import ctypes
import datetime
import json
import os
import socket
import sys
import tempfile
import time

CHECKS = ["all_reduce_sum", "all_reduce_avg", "all_reduce_max", "all_gather_into_tensor",
          "reduce_scatter_tensor", "broadcast", "send_recv", "all_to_all_single", "barrier",
          "all_reduce_large", "ddp_3_steps"]


def library_name(backend):
    """Which libnccl the process got: weft exports weftGetVersion."""
    try:
        ctypes.CDLL(None).weftGetVersion
        return "weft"
    except AttributeError:
        return "nvidia" if backend == "nccl" else "none"


def digest(t):
    """What --compare compares: the whole tensor if small, else a summary."""
    t = t.detach().double().cpu().flatten()
    if t.numel() <= 64:
        return [float(v) for v in t]
    return [float(t.sum()), float(t.abs().max()), float(t[0]), float(t[-1]), t.numel()]


def emulated(backend, err):
    """gloo (dry mode) lacks some calls; NCCL must have them all."""
    return backend == "gloo" and isinstance(err, (RuntimeError, NotImplementedError, ValueError, AttributeError))


def run_checks(rank, world, args, dist, torch, record):
    dev = torch.device("cuda", rank % torch.cuda.device_count()) if args.device == "cuda" else torch.device("cpu")
    n = 1000
    a = (torch.arange(n, device=dev) % 97 + 1).float()

    def x(r):
        return a + r

    def check(name, fn):
        t0 = time.time()
        try:
            ok, detail, value = fn()
        except Exception as e:  # a failed call is a failed check, not a crash
            ok, detail, value = False, "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:200] if str(e) else ""), None
        if args.device == "cuda":
            torch.cuda.synchronize(dev)
        record(name, ok, "%s (%.3f s)" % (detail, time.time() - t0), value)

    def same(got, want, what):
        if torch.equal(got, want):
            return True, what, digest(got)
        bad = int((got != want).sum())
        return False, "%s: %d of %d elements wrong" % (what, bad, want.numel()), digest(got)

    rsum = sum(range(world))

    def ar(op, want):
        t = x(rank).clone()
        dist.all_reduce(t, op=op)
        return same(t, want, "2-rank result")

    check("all_reduce_sum", lambda: ar(dist.ReduceOp.SUM, world * a + rsum))

    def ar_avg():
        want = (world * a + rsum) / world
        t = x(rank).clone()
        try:
            dist.all_reduce(t, op=dist.ReduceOp.AVG)
            note = "2-rank result"
        except Exception as e:
            if not emulated(args.backend, e):
                raise
            t = x(rank).clone()
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
            t /= world
            note = "emulated as SUM/n (gloo has no AVG)"
        return same(t, want, note)

    check("all_reduce_avg", ar_avg)
    check("all_reduce_max", lambda: ar(dist.ReduceOp.MAX, x(world - 1)))

    def ag():
        out = torch.empty(world * n, device=dev)
        try:
            dist.all_gather_into_tensor(out, x(rank))
            note = "gathered"
        except Exception as e:
            if not emulated(args.backend, e):
                raise
            parts = [torch.empty(n, device=dev) for _ in range(world)]
            dist.all_gather(parts, x(rank))
            out = torch.cat(parts)
            note = "emulated with all_gather (gloo lacks all_gather_into_tensor)"
        return same(out, torch.cat([x(r) for r in range(world)]), note)

    check("all_gather_into_tensor", ag)

    def rs():
        b = (torch.arange(world * n, device=dev) % 89).float()
        out = torch.empty(n, device=dev)
        try:
            dist.reduce_scatter_tensor(out, b + rank)
            note = "scattered"
        except Exception as e:
            if not emulated(args.backend, e):
                raise
            t = b + rank
            dist.all_reduce(t)
            out = t[rank * n:(rank + 1) * n].clone()
            note = "emulated with all_reduce (gloo lacks reduce_scatter_tensor)"
        return same(out, world * b[rank * n:(rank + 1) * n] + rsum, note)

    check("reduce_scatter_tensor", rs)

    def bc():
        root = world - 1
        want = (torch.arange(n, device=dev) % 53 + 7).float()
        t = want.clone() if rank == root else torch.zeros(n, device=dev)
        dist.broadcast(t, src=root)
        return same(t, want, "from root %d" % root)

    check("broadcast", bc)

    def sr():
        nxt, prv = (rank + 1) % world, (rank - 1) % world
        got = torch.empty(n, device=dev)
        reqs = [dist.isend(x(rank), nxt), dist.irecv(got, prv)]
        for r in reqs:
            r.wait()
        return same(got, x(prv), "ring: to %d, from %d" % (nxt, prv))

    check("send_recv", sr)

    def a2a():
        k = (torch.arange(n, device=dev) % 7).float()
        inp = torch.cat([100 * rank + 10 * j + k for j in range(world)])
        out = torch.empty(world * n, device=dev)
        dist.all_to_all_single(out, inp)
        return same(out, torch.cat([100 * j + 10 * rank + k for j in range(world)]), "exchanged")

    check("all_to_all_single", a2a)

    def bar():
        dist.barrier()
        return True, "returned", None

    check("barrier", bar)

    def large():
        m = args.large
        t = (torch.arange(m, device=dev) % 1021).float() + rank
        dist.all_reduce(t)
        return same(t, world * ((torch.arange(m, device=dev) % 1021).float()) + rsum, "%d floats" % m)

    check("all_reduce_large", large)
    check("ddp_3_steps", lambda: ddp(rank, world, dev, torch, dist))


def ddp(rank, world, dev, torch, dist):
    """3 SGD steps of DDP; every rank must match a one-process replay."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    def model():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))

    def batch(r, step):
        g = torch.Generator().manual_seed(1000 * step + r)
        return torch.randn(4, 8, generator=g), torch.randn(4, 1, generator=g)

    net = model().to(dev)
    kw = {"device_ids": [dev.index]} if dev.type == "cuda" else {}
    d = DDP(net, **kw)
    opt = torch.optim.SGD(d.parameters(), lr=0.1)
    for step in range(3):
        xb, yb = batch(rank, step)
        opt.zero_grad()
        torch.nn.functional.mse_loss(d(xb.to(dev)), yb.to(dev)).backward()
        opt.step()
    got = torch.cat([p.detach().flatten() for p in net.parameters()]).cpu()
    # Replay: the mean of the ranks' gradients, as DDP averages them.
    ref = model()
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for step in range(3):
        ropt.zero_grad()
        for r in range(world):
            xb, yb = batch(r, step)
            (torch.nn.functional.mse_loss(ref(xb), yb) / world).backward()
        ropt.step()
    want = torch.cat([p.detach().flatten() for p in ref.parameters()])
    err = float((got.double() - want.double()).abs().max())
    return err <= 1e-5, "max |param - replay| = %.2e (limit 1e-5)" % err, digest(got)


def worker(rank, world, args, port, outdir):
    import torch
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    if args.backend == "nccl":
        # Two ranks on one GPU: NVIDIA's NCCL refuses a duplicate GPU within
        # one host, so each rank names its own host (traffic then goes over
        # NCCL's socket transport on loopback).
        os.environ.setdefault("NCCL_HOSTID", "weft-gpu-check-%d" % rank)
        os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
    if args.device == "cuda":
        torch.cuda.set_device(rank % torch.cuda.device_count())
    path = os.path.join(outdir, "rank%d.json" % rank)
    results = []

    def record(name, ok, detail, value):
        results.append({"name": name, "ok": bool(ok), "detail": detail, "value": value})
        with open(path + ".tmp", "w") as f:
            json.dump({"rank": rank, "library": library_name(args.backend), "results": results}, f)
        os.replace(path + ".tmp", path)

    dist.init_process_group(args.backend, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=args.timeout))
    run_checks(rank, world, args, dist, torch, record)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args):
    import torch.multiprocessing as mp
    outdir = tempfile.mkdtemp(prefix="weft-torch-check.")
    ctx = mp.start_processes(worker, args=(args.nranks, args, free_port(), outdir), nprocs=args.nranks,
                             join=False, start_method="spawn")
    deadline, crash = time.time() + args.timeout + 30, None
    while True:
        try:
            if ctx.join(timeout=1):
                break
        except Exception as e:  # a rank died: report what the others recorded
            print(str(e), file=sys.stderr)
            lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()] or [type(e).__name__]
            crash = lines[0] + (" " + lines[-1] if len(lines) > 1 else "")
            break
        if time.time() > deadline:
            crash = "timed out after %d s" % args.timeout
            break
    for p in ctx.processes:
        if p.is_alive():
            p.kill()
    ranks = []
    for r in range(args.nranks):
        try:
            with open(os.path.join(outdir, "rank%d.json" % r)) as f:
                ranks.append(json.load(f))
        except (OSError, ValueError):
            ranks.append({"rank": r, "library": "?", "results": []})
    lib = ranks[0]["library"]
    merged = []
    for name in CHECKS:
        got = [next((c for c in rk["results"] if c["name"] == name), None) for rk in ranks]
        if any(g is None for g in got):
            merged.append({"name": name, "ok": False, "detail": "not reached (%s)" % (crash or "missing"), "value": None})
            continue
        bad = [g for g in got if not g["ok"]]
        merged.append({"name": name, "ok": not bad, "detail": (bad[0] if bad else got[0])["detail"],
                       "value": got[0]["value"]})
    tag = "torch %s %s/%s lib=%s" % (sys.modules["torch"].__version__, args.backend, args.device, lib)
    for m in merged:
        print("%s: %-22s %s  %s" % (tag, m["name"], "PASS" if m["ok"] else "FAIL", m["detail"]))
    npass = sum(m["ok"] for m in merged)
    print("torch check (%s, %d ranks): %d/%d passed%s" % (tag, args.nranks, npass, len(merged),
                                                          "; " + crash if crash else ""))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"library": lib, "backend": args.backend, "device": args.device, "crash": crash,
                       "results": merged}, f, indent=1)
    return 0 if npass == len(merged) and not crash else 1


def compare(ref_path, test_path):
    with open(ref_path) as f:
        ref = json.load(f)
    with open(test_path) as f:
        test = json.load(f)
    same = 0
    for r in ref["results"]:
        t = next((c for c in test["results"] if c["name"] == r["name"]), None)
        if t is None or not t["ok"] or not r["ok"]:
            what = "not comparable: %s %s, %s %s" % (ref["library"], "ok" if r["ok"] else "failed",
                                                     test["library"], "ok" if t and t["ok"] else "failed")
        elif r["value"] is None or (len(r["value"]) == len(t["value"]) and all(
                abs(a - b) <= 1e-5 * max(1.0, abs(a)) for a, b in zip(r["value"], t["value"]))):
            what, same = "same", same + 1
        else:
            what = "differs: %s vs %s" % (r["value"][:4], t["value"][:4])
        print("compare %s vs %s: %-22s %s" % (ref["library"], test["library"], r["name"], what))
    print("torch compare (%s vs %s): %d/%d checks gave the same results" % (ref["library"], test["library"], same,
                                                                             len(ref["results"])))
    return 0 if same == len(ref["results"]) else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", choices=["nccl", "gloo"], default="nccl")
    p.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cuda for nccl, cpu for gloo")
    p.add_argument("--nranks", type=int, default=2)
    p.add_argument("--large", type=int, default=1 << 22, help="elements of the large all_reduce (default 4M)")
    p.add_argument("--timeout", type=int, default=60, help="seconds for the whole run (and each collective)")
    p.add_argument("--out", help="write the results as JSON")
    p.add_argument("--compare", nargs=2, metavar=("REF", "TEST"))
    args = p.parse_args()
    if args.compare:
        return compare(*args.compare)
    args.device = args.device or ("cuda" if args.backend == "nccl" else "cpu")
    import torch
    if args.device == "cuda" and not torch.cuda.is_available():
        print("torch check: SKIP no CUDA device visible (use --backend gloo --device cpu for the dry run)")
        return 0
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
