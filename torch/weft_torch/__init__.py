"""weft_torch: weft's collectives as the torch.distributed backend "weft".

    import weft_torch  # registers the backend
    torch.distributed.init_process_group("weft", ...)

CPU tensors only; on GPUs, load weft as libnccl.so.2 under the "nccl"
backend. Calls are asynchronous: each returns a Work that completes, in
issue order, on the group's weft stream.
"""
import torch.distributed as dist

from . import _C

ProcessGroupWeft = _C.ProcessGroupWeft


def _create(store, rank, size, timeout):
    return _C.create_process_group(store, rank, size, timeout)


if not hasattr(dist.Backend, "WEFT"):
    dist.Backend.register_backend("weft", _create)
