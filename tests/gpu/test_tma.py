"""The opt-in TMA path (TESSERA_TMA) on an sm_90 GPU against torch float64: descriptor matmuls
with ragged M, N, K (boxes past the edges are zero-filled by the TMA unit), every config of
scripts/descriptor_matmul.py, fp16 and bf16, outputs poisoned first; the same kernel without
TMA (cp.async) gives bitwise the same result (same data, same wgmma order). Also: the driver
encodes the tensor maps the host computes (runtime/tensor_map.py). Device-side descriptors
(tl.make_tensor_descriptor: the kernel encodes each map in scratch from tessera.set_allocator)
get the same checks, and the compat suite's persistent descriptor matmul passes its own check
with TMA. The cases live in
scripts/descriptor_matmul.py, where tests/python/compiler/test_tma_ptx.py compiles each of these
launches on the CPU (driver faked); docs/perf/hopper.md has the sanitizer commands.

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
from tessera.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import descriptor_matmul as dm  # noqa: E402


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("block", [[128, 64], [64, 32], [64, 256]])
def test_driver_encodes_the_maps(dtype, block):
    a = torch.randn(333, 264, device="cuda").to(dtype)
    desc = TensorDescriptor.from_tensor(a, block)
    encoded = tm.encode(desc)
    assert len(encoded) == 128 and any(encoded)
    assert tm.host_address(desc) % 64 == 0


def run_matmul(a, b, meta, tma, warp_specialize=False):
    c = torch.full((a.shape[0], b.shape[1]), float("nan"), device="cuda", dtype=a.dtype)
    dm.launch_matmul(a, b, c, meta, tma, warp_specialize=warp_specialize)
    torch.cuda.synchronize()
    return c


@pytest.mark.parametrize("dtype", dm.TMA_DTYPES)
@pytest.mark.parametrize("shape", dm.TMA_SHAPES, ids=dm.TMA_SHAPE_IDS)
@pytest.mark.parametrize("meta", dm.CONFIGS, ids=dm.CONFIG_IDS)
def test_tma_matmul_matches_torch_and_cp_async(dtype, shape, meta):
    m, n, k = shape
    torch.manual_seed(m * n + k)
    a = torch.randn(m, k, device="cuda", dtype=getattr(torch, dtype))
    b = torch.randn(k, n, device="cuda", dtype=getattr(torch, dtype))
    with_tma = run_matmul(a, b, meta, True)
    ref = a.double() @ b.double()
    assert relative_error(with_tma.double(), ref) < 5e-3
    assert torch.equal(with_tma, run_matmul(a, b, meta, False))


@pytest.mark.parametrize("dtype", dm.TMA_DTYPES)
@pytest.mark.parametrize("shape", dm.TMA_SHAPES, ids=dm.TMA_SHAPE_IDS)
@pytest.mark.parametrize("meta", dm.CONFIGS, ids=dm.CONFIG_IDS)
def test_warp_specialized_matmul_matches_torch_and_tma(dtype, shape, meta):
    # A producer warpgroup issues the copies (TESSERA_WARP_SPECIALIZE): the same products in
    # the same order, so bitwise equal to the unspecialized TMA kernel (and to float64).
    m, n, k = shape
    torch.manual_seed(m * n + k + 1)
    a = torch.randn(m, k, device="cuda", dtype=getattr(torch, dtype))
    b = torch.randn(k, n, device="cuda", dtype=getattr(torch, dtype))
    specialized = run_matmul(a, b, meta, True, warp_specialize=True)
    ref = a.double() @ b.double()
    assert relative_error(specialized.double(), ref) < 5e-3
    assert torch.equal(specialized, run_matmul(a, b, meta, True))


@pytest.mark.parametrize("shift", dm.SHIFTS)
def test_boxes_above_and_below_the_tensor_read_zeros(shift):
    meta = dm.CONFIGS[dm.SHIFT_CONFIG]
    m, n, k = dm.SHIFT_SHAPE
    torch.manual_seed(shift)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    dm.launch_matmul(a, b, c, meta, True, shift=shift)
    torch.cuda.synchronize()
    shifted = torch.zeros(m, k, device="cuda", dtype=torch.float64)
    shifted[shift:] = a[:m - shift].double()
    assert torch.all(c[:shift] == 0)
    assert relative_error(c.double(), shifted @ b.double()) < 5e-3


def test_tma_kernel_really_uses_tma():
    a = torch.zeros(256, 256, device="cuda", dtype=torch.float16)
    meta = dm.CONFIGS[0]
    with knobs.scope(tma=True):
        kernel = dm.descriptor_matmul_kernel.compile(*dm.descriptors(a, a, a, meta), 256,
                                                     **meta)
    assert "cp.async.bulk.tensor.2d" in kernel.asm["ptx"]
    assert kernel.metadata.get("tensormaps")


@pytest.mark.parametrize("tma", [True, False])
def test_descriptor_launches_take_the_fast_path(monkeypatch, tma):
    """After the first launch of a specialization, kernel[grid](...) with host descriptors
    launches from C++ (cpp/bindings/python_specialize.h): JITFunction.run is not called again,
    and fresh ragged tensors (new descriptors, so new tensor maps under TMA) still give
    torch's product."""
    from tessera.jit import JITFunction
    runs = []
    run = JITFunction.run

    def counting_run(self, *args, **kwargs):
        runs.append(self.__name__)
        return run(self, *args, **kwargs)
    monkeypatch.setattr(JITFunction, "run", counting_run)
    meta = dm.CONFIGS[0]
    kernel = dm.descriptor_matmul_kernel
    torch.manual_seed(7)
    with knobs.scope(tma=tma):  # set once: a code knob that changes sends launches to run()
        for step in range(4):
            m, n, k = 200 + 2 * step, 136, 72  # ragged, the same key (no dim divisible by 16)
            a = torch.randn(m, k, device="cuda", dtype=torch.float16)
            b = torch.randn(k, n, device="cuda", dtype=torch.float16)
            c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
            grid = (tessera.cdiv(m, meta["BM"]), tessera.cdiv(n, meta["BN"]))
            kernel[grid](*dm.descriptors(a, b, c, meta), k, **meta)
            torch.cuda.synchronize()
            assert relative_error(c.double(), a.double() @ b.double()) < 5e-3
    assert len(runs) <= 1, runs  # the first launch (or none: registered by an earlier test)


# --- device-side descriptors (tl.make_tensor_descriptor, maps encoded by the kernel) -----------

class CountingAllocator:
    """tessera.set_allocator's allocator: torch memory, each call recorded."""

    def __init__(self):
        self.calls = []

    def __call__(self, size, alignment, stream):
        self.calls.append((size, alignment))
        return torch.empty(size, device="cuda", dtype=torch.int8)


@pytest.fixture
def allocator():
    counting = CountingAllocator()
    tessera.set_allocator(counting)
    yield counting
    from tessera.runtime.allocation import NullAllocator
    tessera.set_allocator(NullAllocator())


def run_device_matmul(a, b, meta, tma):
    c = torch.full((a.shape[0], b.shape[1]), float("nan"), device="cuda", dtype=a.dtype)
    dm.launch_device_matmul(a, b, c, meta, tma)
    torch.cuda.synchronize()
    return c


@pytest.mark.parametrize("dtype", dm.TMA_DTYPES)
@pytest.mark.parametrize("shape", dm.TMA_SHAPES, ids=dm.TMA_SHAPE_IDS)
@pytest.mark.parametrize("meta", dm.CONFIGS, ids=dm.CONFIG_IDS)
def test_device_descriptor_tma_matches_torch_and_masked_loads(allocator, dtype, shape, meta):
    m, n, k = shape
    torch.manual_seed(m * n + k + 1)
    a = torch.randn(m, k, device="cuda", dtype=getattr(torch, dtype))
    b = torch.randn(k, n, device="cuda", dtype=getattr(torch, dtype))
    with_tma = run_device_matmul(a, b, meta, True)
    programs = tessera.cdiv(m, meta["BM"]) * tessera.cdiv(n, meta["BN"])
    assert allocator.calls == [(256 * programs, 128)]  # A's and B's maps, per program
    ref = a.double() @ b.double()
    assert relative_error(with_tma.double(), ref) < 5e-3
    assert torch.equal(with_tma, run_device_matmul(a, b, meta, False))
    assert len(allocator.calls) == 1  # without TMA the kernel needs no scratch


def test_device_descriptor_kernel_really_uses_tma():
    a = torch.zeros(256, 256, device="cuda", dtype=torch.float16)
    with knobs.scope(tma=True):
        kernel = dm.device_descriptor_matmul_kernel.compile(a, a, a, 256, 256, 256,
                                                            **dm.CONFIGS[0])
    ptx = kernel.asm["ptx"]
    assert "tensormap.replace.tile.global_address" in ptx and "cp.async.bulk.tensor.2d" in ptx
    assert kernel.metadata["global_scratch_size"] == 256


def test_device_descriptors_without_an_allocator_fail_clearly():
    from tessera.runtime.allocation import NullAllocator
    tessera.set_allocator(NullAllocator())  # whatever an earlier test set
    a = torch.zeros(64, 64, device="cuda", dtype=torch.float16)
    with pytest.raises(RuntimeError, match="requires a runtime memory allocation"):
        dm.launch_device_matmul(a, a, a, dm.CONFIGS[0], True)


def test_compat_persistent_descriptor_matmul_with_tma():
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from compat import loader
    module = loader.load_tessera("descriptor_matmul")
    with knobs.scope(tma=True):
        module.check("cuda")  # its shapes (ragged included), fp16 and bf16, against float64
