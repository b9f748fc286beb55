"""test_backend.py — the torch.distributed backend "weft" against Gloo.

Each test spawns 2 or 4 processes that join one "weft" process group
(init_process_group over a file:// store) and one Gloo group of the same
ranks, run the same calls on the same inputs through both, and compare.
Where Gloo cannot serve a request (a dtype or op it lacks), the expected
value is computed locally from every rank's known input instead. Further
tests check that calls are asynchronous (Work, futures, out-of-order waits),
and that a dead, stalled or mismatched peer ends with a clear error. Run by
tests/run.sh when Debian's torch and pytest are installed:

    PYTHONPATH=build/python python3 -m pytest tests/torch
"""
import os
import time
from datetime import timedelta

import pytest

import compat
import harness

torch = pytest.importorskip("torch")
dist = torch.distributed

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int32,
          torch.int64, torch.bool]
OPS = [dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX]


def rank_input(rank, dtype, n=7):
    """Rank r's input: small values that no reduction overflows, different per rank."""
    if dtype == torch.bool:
        return torch.tensor([(rank + i) % 3 == 0 for i in range(n)])
    return (torch.arange(n) % 3 + rank + 1).to(dtype)


def local_reduce(op, tensors):
    out = tensors[0].clone()
    for t in tensors[1:]:
        if op == dist.ReduceOp.SUM:
            out = out | t if out.dtype == torch.bool else out + t
        elif op == dist.ReduceOp.PRODUCT:
            out = out & t if out.dtype == torch.bool else out * t
        elif op == dist.ReduceOp.MIN:
            out = torch.minimum(out, t)
        else:
            out = torch.maximum(out, t)
    return out


def through_gloo(gloo, fn, fallback):
    """fn(gloo) when Gloo can serve it, else the locally computed fallback()."""
    try:
        return fn(gloo)
    except RuntimeError:
        return fallback()


def check_allreduce(rank, size, gloo):
    for dtype in DTYPES:
        for op in OPS:
            mine = rank_input(rank, dtype)
            theirs = mine.clone()
            dist.all_reduce(mine, op=op)
            want = through_gloo(gloo, lambda g: (dist.all_reduce(theirs, op=op, group=g), theirs)[1],
                                lambda: local_reduce(op, [rank_input(r, dtype) for r in range(size)]))
            assert torch.equal(mine, want), f"all_reduce {dtype} {op}: {mine} != {want}"
    for dtype in (torch.float32, torch.float64):
        t = rank_input(rank, dtype)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        want = sum(rank_input(r, dtype) for r in range(size)) / size
        assert torch.allclose(t, want), f"all_reduce AVG {dtype}: {t} != {want}"


def check_non_contiguous(rank, size, gloo):
    base = torch.zeros(4, 6)
    view = base[:, ::2]  # every other column: not contiguous
    view.copy_(torch.full((4, 3), float(rank + 1)))
    dist.all_reduce(view)
    assert torch.equal(base[:, ::2], torch.full((4, 3), float(size * (size + 1) // 2)))
    assert torch.equal(base[:, 1::2], torch.zeros(4, 3)), "a strided all_reduce wrote outside its view"


def check_rooted(rank, size, gloo):
    root = size - 1
    for dtype in (torch.float32, torch.int64, torch.bfloat16):
        t = rank_input(rank, dtype)
        dist.broadcast(t, src=root)
        assert torch.equal(t, rank_input(root, dtype)), f"broadcast {dtype}"
        t = rank_input(rank, dtype)
        dist.reduce(t, dst=root, op=dist.ReduceOp.MAX)
        if rank == root:
            assert torch.equal(t, local_reduce(dist.ReduceOp.MAX, [rank_input(r, dtype) for r in range(size)]))
    mine = rank_input(rank, torch.float32)
    outs = [torch.empty_like(mine) for _ in range(size)] if rank == root else None
    dist.gather(mine, gather_list=outs, dst=root)
    if rank == root:
        for r in range(size):
            assert torch.equal(outs[r], rank_input(r, torch.float32)), f"gather from rank {r}"
    got = torch.empty(7)
    ins = [rank_input(r, torch.float32) * 10 for r in range(size)] if rank == 0 else None
    dist.scatter(got, scatter_list=ins, src=0)
    assert torch.equal(got, rank_input(rank, torch.float32) * 10), "scatter"


def check_gathers(rank, size, gloo):
    for dtype in (torch.float32, torch.float16, torch.int8, torch.bool):
        mine = rank_input(rank, dtype).reshape(7, 1)
        outs = [torch.empty_like(mine) for _ in range(size)]
        dist.all_gather(outs, mine)
        for r in range(size):
            assert torch.equal(outs[r], rank_input(r, dtype).reshape(7, 1)), f"all_gather {dtype} from {r}"
        flat = torch.empty(size * 7, dtype=dtype)
        dist._all_gather_base(flat, rank_input(rank, dtype))
        assert torch.equal(flat, torch.cat([rank_input(r, dtype) for r in range(size)])), f"_all_gather_base {dtype}"
    ins = [rank_input(rank, torch.float32), rank_input(rank, torch.float32)[:3] * 2]
    outs = [[torch.empty_like(t) for t in ins] for _ in range(size)]
    dist.all_gather_coalesced(outs, ins)
    for r in range(size):
        assert torch.equal(outs[r][0], rank_input(r, torch.float32))
        assert torch.equal(outs[r][1], rank_input(r, torch.float32)[:3] * 2)


def check_reduce_scatter(rank, size, gloo):
    for dtype in (torch.float32, torch.float64, torch.int32):
        parts = [rank_input(rank, dtype) * (p + 1) for p in range(size)]
        out = torch.empty(7, dtype=dtype)
        dist.reduce_scatter(out, parts)
        want = sum(rank_input(r, dtype) for r in range(size)) * (rank + 1)
        assert torch.equal(out, want.to(dtype)), f"reduce_scatter {dtype}"
        out = torch.empty(7, dtype=dtype)
        dist._reduce_scatter_base(out, torch.cat(parts))
        assert torch.equal(out, want.to(dtype)), f"_reduce_scatter_base {dtype}"
    tensors = [rank_input(rank, torch.float32), rank_input(rank, torch.int64)]
    dist.all_reduce_coalesced(tensors[:1])
    assert torch.equal(tensors[0], sum(rank_input(r, torch.float32) for r in range(size)))


def check_alltoall(rank, size, gloo):
    inp = torch.arange(size * 3, dtype=torch.float32) + 100 * rank
    out = torch.empty_like(inp)
    dist.all_to_all_single(out, inp)
    want = torch.cat([torch.arange(rank * 3, rank * 3 + 3, dtype=torch.float32) + 100 * r for r in range(size)])
    assert torch.equal(out, want), "all_to_all_single"
    # Uneven: rank r sends p + 1 rows to rank p; receives r + 1 rows from each.
    in_splits = [p + 1 for p in range(size)]
    out_splits = [rank + 1] * size
    inp = torch.cat([torch.full((p + 1, 2), float(10 * rank + p)) for p in range(size)])
    out = torch.empty(sum(out_splits), 2)
    dist.all_to_all_single(out, inp, out_splits, in_splits)
    want = torch.cat([torch.full((rank + 1, 2), float(10 * r + rank)) for r in range(size)])
    assert torch.equal(out, want), "all_to_all_single with split sizes"
    theirs = torch.empty_like(out)
    dist.all_to_all_single(theirs, inp, out_splits, in_splits, group=gloo)
    assert torch.equal(out, theirs), "all_to_all_single with split sizes, against Gloo"
    ins = [torch.full((p + 2,), float(rank * 10 + p)) for p in range(size)]
    outs = [torch.empty(rank + 2) for _ in range(size)]
    dist.all_to_all(outs, ins)
    for r in range(size):
        assert torch.equal(outs[r], torch.full((rank + 2,), float(r * 10 + rank))), f"all_to_all from {r}"


def check_point_to_point(rank, size, gloo):
    nxt, prev = (rank + 1) % size, (rank - 1) % size
    t = torch.full((5,), float(rank))
    got = torch.empty(5)
    if rank % 2 == 0:
        dist.send(t, nxt)
        dist.recv(got, prev)
    else:
        dist.recv(got, prev)
        dist.send(t, nxt)
    assert torch.equal(got, torch.full((5,), float(prev)))
    req = dist.isend(t, nxt) if rank % 2 == 0 else dist.irecv(got, prev)
    req.wait()
    req = dist.irecv(got, prev) if rank % 2 == 0 else dist.isend(t, nxt)
    req.wait()
    assert torch.equal(got, torch.full((5,), float(prev)))
    dist.barrier()


def check_recv_any_source(rank, size, gloo):
    # Every other rank sends rank 0 two messages (on weft, then on Gloo);
    # rank 0 takes them with recv and irecv without a source, as torch's
    # test_send_recv_any_source does: each returns its sender, whose data it holds.
    for group in (None, gloo):
        if rank != 0:
            dist.send(torch.full((10,), float(rank)), 0, group=group)
            dist.send(torch.full((10,), float(rank + 100)), 0, group=group)
        else:
            seen = {}
            for i in range(2 * (size - 1)):
                got = torch.full((10,), -1.0)
                if i % 2 == 0:
                    sender = dist.recv(got, group=group)
                else:
                    work = dist.irecv(got, group=group)
                    work.wait()
                    sender = work._source_rank()
                assert 0 < sender < size, f"source {sender}"
                want = float(sender + 100 * seen.get(sender, 0))  # each sender's messages in order
                assert torch.equal(got, torch.full((10,), want)), f"from {sender}: {got}"
                seen[sender] = seen.get(sender, 0) + 1
            assert seen == {r: 2 for r in range(1, size)}, f"messages per sender: {seen}"
        dist.barrier()
    # Explicit and any-source receives mixed: the explicit one is owed rank
    # 1's first message, so the later any-source one never takes it.
    if rank == 1:
        for k in range(2):
            dist.send(torch.full((3,), float(k)), 0)
    elif rank == 0:
        first, second = torch.empty(3), torch.empty(3)
        works = [dist.irecv(first, 1), dist.irecv(second)]
        for w in works:
            w.wait()
        assert works[1]._source_rank() == 1
        assert torch.equal(first, torch.zeros(3)) and torch.equal(second, torch.ones(3))
    dist.barrier()


def check_work_and_future(rank, size, gloo):
    t = torch.ones(3)
    work = dist.all_reduce(t, async_op=True)
    assert work.wait()
    assert work.is_completed()
    fut = dist.all_reduce(t, async_op=True).get_future()
    assert torch.equal(fut.wait()[0], torch.full((3,), float(size * size)))
    # Many calls in flight at once, waited for out of order: each Work holds
    # its own call's result, and a future's callbacks see it.
    ts = [torch.full((1000 + i,), float(rank + i)) for i in range(8)]
    works = [dist.all_reduce(x, async_op=True) for x in ts]
    parts = [torch.empty(5, dtype=torch.int64) for _ in range(size)]
    works.append(dist.all_gather(parts, torch.full((5,), rank, dtype=torch.int64), async_op=True))
    seen = works[3].get_future().then(lambda f: f.value()[0][0].item())
    for w in reversed(works):
        w.wait()
    base = size * (size - 1) / 2
    for i, x in enumerate(ts):
        assert torch.equal(x, torch.full((1000 + i,), base + size * i)), f"call {i} of 8 in flight"
    assert all(torch.equal(p, torch.full((5,), r, dtype=torch.int64)) for r, p in enumerate(parts))
    assert seen.wait() == base + size * 3


def check_bad_requests(rank, size, gloo):
    t = torch.ones(3, dtype=torch.int32)
    with pytest.raises(RuntimeError, match="ReduceOp"):
        dist.all_reduce(t, op=dist.ReduceOp.BAND)
    with pytest.raises(RuntimeError, match="dtype"):
        dist.all_reduce(torch.ones(2, dtype=torch.int16))  # NCCL has no 16-bit integer type
    # Still usable afterwards: nothing was sent for the refused calls.
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((3,), size, dtype=torch.int32))


def check_mismatch(rank, size, gloo):
    t = torch.ones(4 + rank)  # every rank a different count
    with pytest.raises(RuntimeError, match="weft"):
        dist.all_reduce(t)


CHECKS = [check_allreduce, check_non_contiguous, check_rooted, check_gathers, check_reduce_scatter, check_alltoall,
          check_point_to_point, check_recv_any_source, check_work_and_future, check_bad_requests]


@pytest.mark.parametrize("size", [2, 4])
def test_collectives_match_gloo(tmp_path, size):
    harness.spawn(harness.run_checks, size, tmp_path, CHECKS)


def test_mismatched_counts_fail_every_rank(tmp_path):
    harness.spawn(harness.run_checks, 2, tmp_path, [check_mismatch])


def dead_peer(rank, size, tmp):
    t = torch.ones(1000)
    dist.all_reduce(t)  # everyone is here
    if rank == size - 1:
        os._exit(0)  # gone without a word (exit 0, so the harness waits for the others)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"weft: allreduce failed on rank \d"):
        for _ in range(100000):  # the first call may finish before the peer is gone
            dist.all_reduce(t)
    assert time.monotonic() - start < 30, "the dead peer was noticed only after 30 s"


def test_dead_peer_fails_every_survivor(tmp_path):
    harness.spawn(dead_peer, 3, tmp_path)


def late_peer(rank, size, tmp):
    t = torch.full((100000,), float(rank))
    dist.barrier()
    if rank == 1:
        time.sleep(1.0)
    start = time.monotonic()
    work = dist.all_reduce(t, async_op=True)
    returned = time.monotonic() - start
    if rank == 0:
        assert returned < 0.5, f"an asynchronous all_reduce took {returned:.3f} s to return"
        assert not work.is_completed(), "completed before its peer called"
    work.wait()
    assert torch.equal(t, torch.full((100000,), 1.0))


def test_calls_return_before_their_peers_arrive(tmp_path):
    harness.spawn(late_peer, 2, tmp_path)


def stalled_peer(rank, size, tmp, explicit_wait):
    t = torch.ones(1000)
    dist.all_reduce(t)  # everyone is here
    if rank == 1:  # alive, but its next call comes after rank 0 gave up
        time.sleep(5)
        with pytest.raises(RuntimeError, match=r"weft: allreduce failed on rank 1"):
            dist.all_reduce(t)
        return
    start = time.monotonic()
    work = dist.all_reduce(t, async_op=True)
    if explicit_wait:
        with pytest.raises(RuntimeError, match=r"weft: allreduce on rank 0 did not complete within wait\(\)'s timeout of 1000 ms"):
            work.wait(timeout=timedelta(seconds=1))
    else:
        with pytest.raises(RuntimeError, match=r"weft: allreduce on rank 0 timed out after 2000 ms \(the process group"):
            work.wait()
    took = time.monotonic() - start
    assert 0.9 < took < 4, f"the timeout fired after {took:.2f} s"
    assert work.is_completed()
    with pytest.raises(RuntimeError, match="revoked"):
        dist.all_reduce(t)


def test_group_timeout_revokes_the_communicator(tmp_path):
    harness.spawn(stalled_peer, 2, tmp_path, False, pg_timeout=timedelta(seconds=2))


def test_wait_timeout_revokes_the_communicator(tmp_path):
    harness.spawn(stalled_peer, 2, tmp_path, True)


def check_cpu_backend_declared(rank, size, tmp):
    import warnings
    assert dist.Backend.backend_capability["weft"] == ["cpu"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        group = dist.new_group(backend="cpu:weft")
    assert not [w for w in caught if "capability" in str(w.message)], [str(w.message) for w in caught]
    t = torch.full((5,), float(rank + 1))
    dist.all_reduce(t, group=group)
    assert torch.equal(t, torch.full((5,), float(size * (size + 1) // 2)))


@pytest.mark.skipif(not compat.has_device_backends(), reason="torch 1.13 has no per-device backends")
def test_cpu_backend_declared(tmp_path):
    """torch 2.x: "weft" declares the CPU as its device, and a "cpu:weft" group works."""
    harness.spawn(check_cpu_backend_declared, 2, tmp_path)
