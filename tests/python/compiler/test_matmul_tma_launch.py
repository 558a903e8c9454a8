"""ops.matmul's launches of its persistent TMA family as on an sm_90a GPU, the driver faked
(test_tma_ptx.fake_gpu: module loading, the launch, the arguments' device and arch), the
GPU's properties faked as an H200's (132 SMs): each TMA config launched untuned through
gemm.matmul_forward(config=) and ops.matmul tuned off (its first config), A and B row-major
or both given as x.t(). Each launch gets the cross-tile kernel (rings made before the tile loop),
min(132, tiles) programs, and scratch for A's and B's maps (256 bytes per program) from the
caller's allocator, else from ops.matmul's default one; inputs the family cannot take launch
the pointer kernel, no scratch. tests/gpu/test_matmul_tma.py makes such launches on the GPU."""
import os
import sys

import pytest

import tessera
from tessera.config import knobs
from tessera.device import driver
from tessera.ops import gemm, gemm_tma
from tessera.runtime import allocation

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_tma_ptx as host_tma  # noqa: E402

fake_gpu = host_tma.fake_gpu  # the faked driver (a module fixture)
SMS = 132


H200 = driver.DeviceProperties(0, "NVIDIA H200 (faked)", (9, 0), SMS, 1024, 32, 49152, 232448,
                               233472, 65536, 60 << 20)


@pytest.fixture
def hopper(fake_gpu, monkeypatch):
    monkeypatch.setattr(gemm_tma, "_arch", lambda x: "sm_90a")  # CPU tensors stand for CUDA's
    monkeypatch.setattr(gemm_tma, "sm_count", lambda x: SMS)
    monkeypatch.setattr(driver, "get_device_properties", lambda device: H200)  # the tuner's
    try:
        with knobs.scope(tma=True, wgmma=True, autotune="off"):
            yield fake_gpu
    finally:
        gemm.matmul_entry._kernels.clear()  # the fixture's fake launchers
        gemm.tuned_matmul_kernel.cache.clear()


class Allocations:
    def __init__(self, torch):
        self.torch, self.calls = torch, []

    def __call__(self, size, alignment, stream):
        self.calls.append((size, alignment, stream))
        raw = self.torch.empty(size + alignment, dtype=self.torch.int8)
        start = -raw.data_ptr() % alignment
        return raw[start:start + size]


def operands(torch, m, n, k, transposed):
    """A and B, row-major, or both given as x.t() of a row-major tensor."""
    if transposed:
        return (torch.zeros(k, m, dtype=torch.float16).t(),
                torch.zeros(n, k, dtype=torch.float16).t())
    return torch.zeros(m, k, dtype=torch.float16), torch.zeros(k, n, dtype=torch.float16)


def check_tma_launch(gpu, config, m, n):
    kernel, kinds, buffer = gpu.launches[-1]
    tgir = kernel.asm["tgir"]
    assert "cp.async.bulk.tensor" in kernel.asm["ptx"]
    assert tgir.index("mbarrier_init") < tgir.index("flatten = 1")  # rings across tiles
    tiles = tessera.cdiv(m, config.kwargs["BLOCK_M"]) * tessera.cdiv(n, config.kwargs["BLOCK_N"])
    assert kernel.metadata["global_scratch_size"] == 256 and kinds[-1] == "ptr"
    return min(SMS, tiles)


@pytest.mark.parametrize("transposed", [False, True], ids=["rows", "both-t"])
@pytest.mark.parametrize("config", gemm.TMA_CONFIGS,
                         ids=[str(i) for i in range(len(gemm.TMA_CONFIGS))])
def test_each_tma_config_launches_persistent(hopper, config, transposed):
    torch = hopper.torch
    m, n, k = 2504, 2056, 1032  # more tiles than SMs for every config
    a, b = operands(torch, m, n, k, transposed)
    allocations = Allocations(torch)
    allocation.set_allocator(allocations)
    try:
        gemm.matmul_forward(a, b, None, "", config=config)
    finally:
        allocation.set_allocator(allocation.NullAllocator())
    programs = check_tma_launch(hopper, config, m, n)
    assert programs == SMS and allocations.calls == [(256 * programs, 128, 0)]


def test_ops_matmul_launches_the_tma_family_with_the_default_allocator(hopper, monkeypatch):
    torch = hopper.torch
    a, b = operands(torch, 296, 264, 120, True)  # fewer tiles than SMs
    bias = torch.zeros(264, dtype=torch.float16)
    made = []  # the default allocator ops.matmul makes (none set), recorded as it serves
    default = gemm_tma.scratch_allocator

    def recorded(like):
        allocate = default(like)
        return lambda size, alignment, stream: made.append(size) or allocate(size, alignment,
                                                                              stream)
    monkeypatch.setattr(gemm_tma, "scratch_allocator", recorded)
    with knobs.scope(matmul_tma="on"):
        tessera.ops.matmul(a, b, bias, "leaky_relu")
    config = gemm.tuned_matmul_kernel.best_config
    assert config == gemm.TMA_CONFIGS[0]  # the first TMA config: tuning is off
    programs = check_tma_launch(hopper, config, 296, 264)
    assert programs == 3 * 2 and made == [256 * programs]


def test_other_inputs_launch_the_pointer_kernel(hopper):
    torch = hopper.torch
    a = torch.zeros(300, 144, dtype=torch.float16)[:, ::2]  # columns strided: no tensor map
    b = torch.zeros(72, 264, dtype=torch.float16)
    allocations = Allocations(torch)
    allocation.set_allocator(allocations)
    try:
        with knobs.scope(matmul_tma="on"):
            tessera.ops.matmul(a, b)
    finally:
        allocation.set_allocator(allocation.NullAllocator())
    kernel = hopper.launches[-1][0]
    assert gemm.family(gemm.tuned_matmul_kernel.best_config) == "pointer"
    assert "mbarrier" not in kernel.asm["ptx"] and allocations.calls == []
