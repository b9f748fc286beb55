"""compat.py — what differs between the PyTorches the tests run on (Debian
12's 1.13 on the machine, Debian 13's 2.6 in the root that `make
test-torch2` makes), in one place.
"""
from datetime import timedelta


def torchrun_store_error():
    """Why torchrun's rendezvous store cannot start in this torch, or None.

    Debian 13's torch 2.6 is built without libuv, yet torchrun's rendezvous
    makes its TCPStore with libuv whatever USE_LIBUV says, so torchrun fails
    there with any backend (gloo as well)."""
    from torch.distributed import TCPStore
    try:
        TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=5))  # as torchrun's rendezvous makes it
    except RuntimeError as e:
        if "libuv" in str(e):
            return str(e)
        raise
    return None


def has_device_backends():
    """torch 2.x names a backend per device ("cpu:weft,cuda:nccl"); 1.13 does not."""
    import torch.distributed as dist
    return hasattr(dist.Backend, "backend_capability")


def no_dtensor_reason():
    """Why this torch lacks the public DeviceMesh/DTensor/tensor-parallel API
    (torch.distributed.device_mesh, torch.distributed.tensor.parallel, both
    public from 2.4), or None when it has it. Debian 12's 1.13 has none of it."""
    try:
        from torch.distributed.device_mesh import init_device_mesh  # noqa: F401
        from torch.distributed.tensor import DTensor  # noqa: F401
        from torch.distributed.tensor.parallel import parallelize_module  # noqa: F401
        import torch.distributed._functional_collectives  # noqa: F401
        import torch.distributed.checkpoint  # noqa: F401
    except ImportError as e:
        import torch
        return f"torch {torch.__version__} has no public DeviceMesh/DTensor API ({e})"
    return None
