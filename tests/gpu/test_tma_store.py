"""TMA stores of tensor descriptors (TESSERA_TMA_STORE, sm_90a) against torch.

The descriptor matmul's epilogue (`c_desc.store`) with ragged M, N (boxes past the tensor's
edges are clipped by the TMA unit), fp16 and bf16 outputs poisoned first, against float64 and
bitwise against the same kernel with the pointer store (same products, same rounding); with a
producer warpgroup too; the same through device descriptors (tl.make_tensor_descriptor) and
the compat suite's persistent descriptor matmul. A plain copy through two descriptors over
ragged 2-D shapes checks every element and that nothing outside the destination view is
written (a guard region around it, in the same allocation, keeps its sentinel). Design:
docs/perf/hopper.md, "TMA stores". CPU checks: tests/python/compiler/test_tma_store_ptx.py.
"""
import os
import sys

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)
if torch.cuda.get_device_capability() < (9, 0):
    pytest.skip("TMA stores need sm_90a", allow_module_level=True)

import tessera  # noqa: E402
import tessera.language as tl  # noqa: E402
from tessera.config import knobs  # noqa: E402
from tessera.testing import relative_error  # noqa: E402
from tessera.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import descriptor_matmul as dm  # noqa: E402

# N a multiple of 16 takes the TMA store; N = 200 keeps the masked pointer store (the TMA
# writes whole 16-byte chunks: it may not store across an extent that is not proven aligned).
SHAPES = [(300, 208, 128), (1000, 1008, 256), (72, 528, 40), (300, 200, 128)]


@tessera.jit
def descriptor_copy_kernel(x_desc, y_desc, BM: tl.constexpr, BN: tl.constexpr):
    m = tl.program_id(0) * BM
    n = tl.program_id(1) * BN
    y_desc.store([m, n], x_desc.load([m, n]))


def run_matmul(a, b, meta, store, warp_specialize=False):
    c = torch.full((a.shape[0], b.shape[1]), float("nan"), device="cuda", dtype=a.dtype)
    with knobs.scope(tma_store=store):
        dm.launch_matmul(a, b, c, meta, True, warp_specialize=warp_specialize)
    torch.cuda.synchronize()
    return c


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("shape", SHAPES, ids=["x".join(map(str, s)) for s in SHAPES])
@pytest.mark.parametrize("meta", dm.CONFIGS, ids=dm.CONFIG_IDS)
def test_tma_store_matmul(dtype, shape, meta):
    m, n, k = shape
    torch.manual_seed(m + n + k)
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    c = run_matmul(a, b, meta, True)
    assert relative_error(c.double(), a.double() @ b.double()) < 5e-3
    assert torch.equal(c, run_matmul(a, b, meta, False))


@pytest.mark.parametrize("meta", dm.CONFIGS[:2], ids=dm.CONFIG_IDS[:2])
def test_tma_store_warp_specialized(meta):
    torch.manual_seed(7)
    a = torch.randn(300, 128, device="cuda", dtype=torch.float16)
    b = torch.randn(128, 200, device="cuda", dtype=torch.float16)
    c = run_matmul(a, b, meta, True, warp_specialize=True)
    assert torch.equal(c, run_matmul(a, b, meta, False, warp_specialize=True))


@pytest.fixture
def allocator():
    """tessera.set_allocator's allocator (device descriptors' maps): torch memory."""
    tessera.set_allocator(lambda size, alignment, stream: torch.empty(
        size, device="cuda", dtype=torch.int8))
    yield
    from tessera.runtime.allocation import NullAllocator
    tessera.set_allocator(NullAllocator())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("meta", dm.CONFIGS, ids=dm.CONFIG_IDS)
def test_tma_store_device_descriptor_matmul(allocator, dtype, meta):
    # tl.make_tensor_descriptor: C's map, encoded in the kernel's scratch, is the store's.
    m, n, k = 300, 200, 128
    torch.manual_seed(m + n + k + 3)
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    out = {}
    for store in (True, False):
        out[store] = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
        with knobs.scope(tma_store=store):
            dm.launch_device_matmul(a, b, out[store], meta, True)
        torch.cuda.synchronize()
    assert relative_error(out[True].double(), a.double() @ b.double()) < 5e-3
    assert torch.equal(out[True], out[False])


def test_tma_store_compat_persistent_matmul(allocator):
    # triton_compat.py's descriptor_matmul (the A/B's kernel): its own shapes and checks.
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from compat import loader
    with knobs.scope(tma=True, tma_store=True):
        loader.load_tessera("descriptor_matmul").check("cuda")


COPIES = [(torch.float16, 64, 64), (torch.float16, 128, 128), (torch.bfloat16, 32, 16),
          (torch.float32, 32, 64), (torch.int8, 64, 128), (torch.float16, 16, 8)]


def guarded(m, n, dtype, fill, guard=16):
    """(buffer, view): an m x n view `guard` elements inside a buffer of `fill`, its rows
    padded to 16 elements (descriptor strides are multiples of 16 bytes)."""
    width = -(-(n + 2 * guard) // 16) * 16
    big = torch.full((m + 2 * guard, width), fill, device="cuda", dtype=dtype)
    return big, big[guard:guard + m, guard:guard + n]


@pytest.mark.parametrize("dtype,bm,bn", COPIES, ids=lambda v: str(v).replace("torch.", ""))
@pytest.mark.parametrize("shape", [(300, 200), (77, 136), (1000, 48), (77, 144), (300, 208)],
                         ids=str)
def test_tma_store_copy_stays_inside(dtype, bm, bn, shape):
    m, n = shape
    torch.manual_seed(m * n + bm)
    _, x = guarded(m, n, dtype, 0)
    if dtype.is_floating_point:
        x.copy_(torch.randn(m, n, device="cuda").to(dtype))
    else:
        x.copy_(torch.randint(-100, 100, (m, n), device="cuda", dtype=dtype))
    big, y = guarded(m, n, dtype, 77)
    grid = (tessera.cdiv(m, bm), tessera.cdiv(n, bn))
    with knobs.scope(tma=True, tma_store=True):
        descriptor_copy_kernel[grid](TensorDescriptor.from_tensor(x, [bm, bn]),
                                     TensorDescriptor.from_tensor(y, [bm, bn]), BM=bm, BN=bn)
    torch.cuda.synchronize()
    assert torch.equal(y, x)
    outside = torch.ones(big.shape, device="cuda", dtype=torch.bool)
    outside[16:16 + m, 16:16 + n] = False
    assert bool((big[outside] == 77).all()), "the store wrote outside the destination view"
