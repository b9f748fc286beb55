"""dist_suite.py — PyTorch's own distributed test suite
(torch/testing/_internal/distributed/distributed_test.py, shipped in
Debian's python3-torch) run on one backend, as PyTorch's
test_distributed_spawn.py runs it: BACKEND and WORLD_SIZE come from the
environment. With BACKEND=weft the module imports weft_torch, which
registers "weft", and declares it to the suite as a third-party backend
that does DDP and subgroups on CPU tensors (what weft does); the suite's
CUDA-only tests skip themselves on a machine without GPUs. Not named
test_*.py: tests/torch's own pytest run must not collect it.
"""
import os

from torch.testing._internal.common_distributed import DistTestCases

if os.environ["BACKEND"] == "weft":
    import weft_torch  # noqa: F401  registers the backend

    for feature in ("plugin", "ddp", "subgroup"):
        DistTestCases.backend_feature[feature].add("weft")

# The suite reads DistTestCases while defining its tests, so this import
# comes after the declaration above.
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()
