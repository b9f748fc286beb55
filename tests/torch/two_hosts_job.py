"""two_hosts_job.py — one rank of a job spread over two hosts (network
namespaces with their own host names, test_two_hosts.py), launched by
torchrun per host. Checks that the ranks see two hosts of two ranks each,
then compares weft's all_reduce (4 KB and 4 MB), all_to_all_single and
all_gather with Gloo's on the same ranks and inputs, and a broadcast from
the last rank. Prints "rank R ok on HOST".
"""
import socket

import torch
import torch.distributed as dist

import weft_torch  # noqa: F401  (registers the backend)

dist.init_process_group("weft")  # env://, torchrun's static rendezvous on host 0
rank, size = dist.get_rank(), dist.get_world_size()
gloo = dist.new_group(backend="gloo")
host = socket.gethostname()
names = [None] * size
dist.all_gather_object(names, host)
assert sorted(names.count(n) for n in set(names)) == [size // 2, size // 2], names

for n in (1000, 1 << 20):
    t = torch.arange(n, dtype=torch.float32) * (rank + 1)
    ref = t.clone()
    dist.all_reduce(t)
    dist.all_reduce(ref, group=gloo)
    assert torch.equal(t, ref), f"all_reduce of {n} floats differs from Gloo's"
inp = torch.arange(size * 3, dtype=torch.int64) + 100 * rank
out, ref = torch.empty_like(inp), torch.empty_like(inp)
dist.all_to_all_single(out, inp)
dist.all_to_all_single(ref, inp, group=gloo)
assert torch.equal(out, ref), "all_to_all_single differs from Gloo's"
parts = [torch.empty(7, dtype=torch.float64) for _ in range(size)]
dist.all_gather(parts, torch.full((7,), rank + 0.5, dtype=torch.float64))
assert all(torch.equal(p, torch.full((7,), r + 0.5, dtype=torch.float64)) for r, p in enumerate(parts))
b = torch.full((5000,), float(rank))
dist.broadcast(b, src=size - 1)
assert torch.equal(b, torch.full((5000,), float(size - 1)))
dist.barrier()
print(f"rank {rank} ok on {host}", flush=True)
dist.destroy_process_group()
