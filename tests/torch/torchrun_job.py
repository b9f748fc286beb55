"""torchrun_job.py — a program written for Gloo, run with backend "weft":
torchrun sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, and
init_process_group("weft") rendezvouses through env:// (a TCPStore).
Prints "rank R ok" when its all_reduce and all_gather are right.
"""
import torch
import torch.distributed as dist

import weft_torch  # noqa: F401  (registers the backend)

dist.init_process_group("weft")  # env://
rank, size = dist.get_rank(), dist.get_world_size()
t = torch.full((1000,), float(rank + 1))
dist.all_reduce(t)
assert torch.equal(t, torch.full((1000,), float(size * (size + 1) // 2))), t
parts = [torch.empty(3, dtype=torch.int64) for _ in range(size)]
dist.all_gather(parts, torch.full((3,), rank, dtype=torch.int64))
assert all(torch.equal(p, torch.full((3,), r, dtype=torch.int64)) for r, p in enumerate(parts)), parts
dist.destroy_process_group()
print(f"rank {rank} ok")
