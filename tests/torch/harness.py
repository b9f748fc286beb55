"""harness.py — processes for the weft_torch tests.

spawn(fn, size, tmp, *args, pg_timeout=None, backend="weft") starts `size`
processes (torch.multiprocessing, so an exception in any rank fails the
test with its traceback), each of which joins the default process group of
`backend` ("weft", or "gloo" to run the same program on Gloo) through a
file:// store in `tmp` (with the group timeout `pg_timeout`, a timedelta,
when given) and calls fn(rank, size, tmp, *args); every rank runs under a
time limit (WEFT_TIMEOUT with WEFT_TIMEOUT_FAIL=1 bounds weft's own waits),
so a hang fails instead of stalling make test.
"""
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import weft_torch  # noqa: F401  (registers the backend)

LIMIT_S = 120


class RanksTimedOut(AssertionError):
    """Ranks were still running at LIMIT_S and were killed."""


def _entry(rank, fn, size, tmp, args, pg_timeout, backend="weft"):
    os.environ.setdefault("WEFT_TIMEOUT", "60")
    os.environ.setdefault("WEFT_TIMEOUT_FAIL", "1")
    os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
    extra = {"timeout": pg_timeout} if pg_timeout is not None else {}
    dist.init_process_group(backend, init_method=f"file://{tmp}/store", rank=rank, world_size=size, **extra)
    try:
        fn(rank, size, tmp, *args)
    finally:
        dist.destroy_process_group()


def spawn(fn, size, tmp, *args, pg_timeout=None, backend="weft"):
    ctx = mp.start_processes(_entry, args=(fn, size, str(tmp), args, pg_timeout, backend), nprocs=size, join=False, start_method="spawn")
    deadline = time.monotonic() + LIMIT_S
    while not ctx.join(timeout=max(1.0, deadline - time.monotonic())):  # raises when a rank failed
        if time.monotonic() >= deadline:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
            raise RanksTimedOut(f"{size} ranks still running after {LIMIT_S} s")


def run_checks(rank, size, tmp, checks):
    """Each check(rank, size, gloo) in turn, with a Gloo group of the same ranks."""
    gloo = dist.new_group(backend="gloo")
    for check in checks:
        check(rank, size, gloo)
