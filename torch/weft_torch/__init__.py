"""weft_torch: weft's collectives as the torch.distributed backend "weft".

    import weft_torch  # registers the backend
    torch.distributed.init_process_group("weft", ...)

CPU tensors only; on GPUs, load weft as libnccl.so.2 under the "nccl"
backend. Calls are asynchronous: each returns a Work that completes, in
issue order, on the group's weft stream.
"""
import inspect

import torch.distributed as dist

from . import _C

ProcessGroupWeft = _C.ProcessGroupWeft


def _create(store, rank, size, timeout):
    return _C.create_process_group(store, rank, size, timeout)


def _register():
    # torch 2.x asks which devices a backend serves; declaring "cpu" keeps
    # CUDA tensors away from weft and allows groups like "cpu:weft,cuda:nccl".
    # torch 1.13 has no such argument.
    kwargs = {}
    if "devices" in inspect.signature(dist.Backend.register_backend).parameters:
        kwargs["devices"] = ["cpu"]
    dist.Backend.register_backend("weft", _create, **kwargs)


if not hasattr(dist.Backend, "WEFT"):
    _register()
