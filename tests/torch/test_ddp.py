"""test_ddp.py — DistributedDataParallel over the "weft" backend trains to
the same parameters as over Gloo.

Every rank builds two identical copies of a small MLP (same seed), wraps
one in DDP over the default "weft" group and the other over a Gloo group
of the same ranks, and takes the same SGD steps on its own batch with
both: DDP's start-up broadcast, its parameter check (all_gather) and its
bucketed gradient all_reduce (through Work futures) all run on weft, and
the parameters must match Gloo's after every step.
"""
import copy

import pytest

import harness

torch = pytest.importorskip("torch")
dist = torch.distributed
DDP = torch.nn.parallel.DistributedDataParallel

STEPS = 5


def train_both(rank, size, tmp):
    gloo = dist.new_group(backend="gloo")
    torch.manual_seed(1234 + rank)  # different on each rank: DDP's broadcast must even them out
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    on_weft = DDP(model, bucket_cap_mb=0.001)  # several buckets: several all_reduce calls per step
    on_gloo = DDP(copy.deepcopy(model), process_group=gloo, bucket_cap_mb=0.001)
    for a, b in zip(on_weft.parameters(), on_gloo.parameters()):
        assert torch.equal(a, b), "the two copies start apart"
    opt_w = torch.optim.SGD(on_weft.parameters(), lr=0.1)
    opt_g = torch.optim.SGD(on_gloo.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(rank)
    for step in range(STEPS):
        x = torch.randn(8, 16, generator=data)
        y = torch.randn(8, 4, generator=data)
        for ddp, opt in ((on_weft, opt_w), (on_gloo, opt_g)):
            opt.zero_grad()
            torch.nn.functional.mse_loss(ddp(x), y).backward()
            opt.step()
        for a, b in zip(on_weft.parameters(), on_gloo.parameters()):
            assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), f"step {step}: weft and Gloo parameters differ"
    # And every rank holds the same parameters.
    for p in on_weft.parameters():
        first = p.detach().clone()
        dist.broadcast(first, src=0)
        assert torch.equal(first, p.detach()), "ranks hold different parameters"


@pytest.mark.parametrize("size", [2, 4])
def test_ddp_matches_gloo(tmp_path, size):
    harness.spawn(train_both, size, tmp_path)
