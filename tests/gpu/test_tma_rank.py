"""TMA copies through descriptors of rank 3 and 4 (TESSERA_TMA, sm_90): batched matmuls whose
descriptors' blocks are [1, BM, BK] / [1, 1, BM, BK] (scripts/batched_descriptor_matmul.py),
host maps encoded by the driver and device maps encoded by the kernel, against torch float64
on ragged M (each batch's boxes past M read the TMA's zero fill, never the next batch's rows:
the inputs' rows past M are NaN), and bitwise equal to the same kernel without the TMA
(pointer loads, the same products in the same order). Fast (no timing); the CPU side is
tests/python/compiler/test_tma_rank_ptx.py.

Bound: ‖out − ref‖ / ‖ref‖ < 5e-3.
"""
import os
import sys

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)
if torch.cuda.get_device_capability() < (9, 0):
    pytest.skip("TMA needs sm_90", allow_module_level=True)

import tessera  # noqa: E402
from tessera.config import knobs  # noqa: E402
from tessera.runtime import tensor_map as tm  # noqa: E402
from tessera.testing import relative_error  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import batched_descriptor_matmul as bm  # noqa: E402


@pytest.fixture
def allocator():
    tessera.set_allocator(lambda size, alignment, stream: torch.empty(
        size, device="cuda", dtype=torch.int8))
    yield
    from tessera.runtime.allocation import NullAllocator
    tessera.set_allocator(NullAllocator())


def inputs(shape, dtype, seed):
    """a [B, M, K], b [B, K, N] views of buffers whose rows past M (and K) are NaN."""
    batches, m, n, k = shape
    torch.manual_seed(seed)
    a = torch.full((batches, m + 16, k), float("nan"), device="cuda", dtype=dtype)
    b = torch.full((batches, k + 16, n), float("nan"), device="cuda", dtype=dtype)
    a[:, :m] = torch.randn(batches, m, k, device="cuda").to(dtype)
    b[:, :k] = torch.randn(batches, k, n, device="cuda").to(dtype)
    return a[:, :m], b[:, :k]


def run(a, b, meta, tma, rank=3, device=False):
    c = torch.full((a.shape[0], a.shape[1], b.shape[2]), float("nan"), device="cuda",
                   dtype=a.dtype)
    with knobs.scope(tma=tma):
        bm.launch(a, b, c, meta, rank, device)
    torch.cuda.synchronize()
    return c


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("shape", bm.SHAPES, ids=bm.SHAPE_IDS)
@pytest.mark.parametrize("meta", bm.CONFIGS, ids=bm.CONFIG_IDS)
@pytest.mark.parametrize("rank,device", [(3, False), (4, False), (3, True)],
                         ids=["host3d", "host4d", "device3d"])
def test_rank_n_tma_matmul_matches_torch_and_pointer_loads(allocator, rank, device, meta,
                                                           shape, dtype):
    if rank == 4 and shape[0] % 2:
        pytest.skip("the 4-D view splits the batch in two")
    a, b = inputs(shape, dtype, sum(shape) + rank)
    with_tma = run(a, b, meta, True, rank, device)
    ref = torch.einsum("bmk,bkn->bmn", a.double(), b.double())
    assert relative_error(with_tma.double(), ref) < 5e-3
    assert torch.equal(with_tma, run(a, b, meta, False, rank, device))


def test_rank_n_kernels_really_use_tma():
    meta = bm.CONFIGS[0]
    a = torch.zeros(2, 256, 256, device="cuda", dtype=torch.float16)
    c = torch.zeros_like(a)
    with knobs.scope(tma=True):
        kernel = bm.batched_matmul_kernel.compile(*bm.descriptors(a, a, meta), c, 256, 256, 256,
                                                  c.stride(0), c.stride(1), **meta)
    assert "cp.async.bulk.tensor.3d" in kernel.asm["ptx"] and kernel.metadata.get("tensormaps")


def test_driver_encodes_rank_n_maps():
    a = torch.randn(6, 333, 128, device="cuda").to(torch.float16)
    for rank, view in ((3, a), (4, a.view(3, 2, 333, 128))):
        desc = bm.TensorDescriptor.from_tensor(view, [1] * (rank - 2) + [128, 64])
        encoded = tm.encode(desc)
        assert len(encoded) == 128 and any(encoded) and tm.host_address(desc) % 64 == 0
