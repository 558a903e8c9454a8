"""Triton 3.6 names on the GPU against NumPy: tl.core.constexpr_function and
tl.core._unwrap_if_constexpr sizing a kernel's block; the device's target as
triton.backends.compiler.GPUTarget, compiled through triton.compiler.compiler.ASTSource;
tl.extra.cuda's helpers."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import tessera  # noqa: E402
import tessera.language as tl  # noqa: E402
from tessera.language.extra import cuda  # noqa: E402


@tl.core.constexpr_function
def doubled_block(block):
    return 2 * tl.core._unwrap_if_constexpr(block)


@tessera.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    WIDE: tl.constexpr = doubled_block(BLOCK)
    offs = tl.program_id(0) * WIDE + tl.arange(0, WIDE)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * WIDE, mask=mask)


@pytest.mark.parametrize("n", [1, 300, 1000])
def test_tl_core_constexpr_function(n):
    x = torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    scale_kernel[(triton_cdiv(n, 64),)](x, out, n, BLOCK=32)
    np.testing.assert_array_equal(out.cpu().numpy(), x.cpu().numpy() * np.float32(64))


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


def test_current_target_compiles_through_triton_paths():
    from tessera.backends.compiler import GPUTarget
    from tessera.compiler.compiler import ASTSource
    target = tessera.runtime.driver.active.get_current_target()
    assert isinstance(target, GPUTarget) and target.backend == "cuda"
    src = ASTSource(scale_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32",
                                   "BLOCK": "constexpr"}, constexprs={"BLOCK": 32})
    compiled = tessera.compile(src, target=target)
    assert compiled.metadata["arch"].startswith(f"sm_{target.arch}")


@tessera.jit
def warps_kernel(x_ptr, out_ptr, n):
    cuda.gdc_wait()
    offs = tl.program_id(0) * cuda.num_threads() + tl.arange(0, cuda.num_threads())
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    cuda.gdc_launch_dependents()
    tl.store(out_ptr + offs, x * cuda.num_warps(), mask=mask)


@tessera.jit
def timer_kernel(elapsed_ptr, sm_ptr):
    start = cuda.globaltimer()
    tl.store(sm_ptr + tl.program_id(0), cuda.smid())
    tl.store(elapsed_ptr + tl.program_id(0), cuda.globaltimer() - start)


@pytest.mark.parametrize("num_warps", [1, 4, 8])
@pytest.mark.parametrize("n", [1, 300, 1000])
def test_num_warps_and_gdc(n, num_warps):
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("griddepcontrol needs sm_90")
    x = torch.randint(-1000, 1000, (n,), device="cuda", dtype=torch.int32)
    out = torch.empty_like(x)
    warps_kernel[(triton_cdiv(n, 32 * num_warps),)](x, out, n, num_warps=num_warps)
    np.testing.assert_array_equal(out.cpu().numpy(), x.cpu().numpy() * num_warps)


def test_globaltimer_and_smid():
    programs = 64
    elapsed = torch.full((programs,), -1, device="cuda", dtype=torch.int64)
    sm = torch.full((programs,), -1, device="cuda", dtype=torch.int32)
    timer_kernel[(programs,)](elapsed, sm)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert (elapsed.cpu().numpy() >= 0).all()
    assert ((sm.cpu().numpy() >= 0) & (sm.cpu().numpy() < sms)).all()


def _decode_e4b15(code: int) -> float:
    sign = -1.0 if code & 0x80 else 1.0
    exponent, mantissa = (code >> 3) & 0xF, code & 7
    if exponent == 0:
        return sign * mantissa / 8 * 2.0 ** -14
    return sign * (1 + mantissa / 8) * 2.0 ** (exponent - 15)


@tessera.jit
def e4b15_round_trip(x_ptr, bits_ptr, back_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = cuda.convert_custom_float8_sm80(tl.load(x_ptr + offs, mask=mask), tl.float8e4b15)
    tl.store(bits_ptr + offs, y.to(tl.uint8, bitcast=True), mask=mask)
    tl.store(back_ptr + offs, cuda.convert_custom_float8_sm70(y, tl.float32), mask=mask)


@pytest.mark.parametrize("n", [1, 300, 1000])
def test_custom_float8_matches_the_interpreter(n):
    # The interpreter's bits are checked against a float64 reference on the CPU
    # (tests/python/language/test_custom_float8.py); here the GPU must give the same bits.
    x = torch.randn(n, device="cuda") * 2.0 ** torch.randint(-20, 4, (n,), device="cuda")
    bits = torch.empty(n, device="cuda", dtype=torch.uint8)
    back = torch.empty(n, device="cuda")
    e4b15_round_trip[(triton_cdiv(n, 128),)](x, bits, back, n, BLOCK=128)
    cpu_bits = np.zeros(n, np.uint8)
    cpu_back = np.zeros(n, np.float32)
    tessera.jit(e4b15_round_trip.fn, interpret=True)[(triton_cdiv(n, 128),)](
        x.cpu().numpy(), cpu_bits, cpu_back, n, BLOCK=128)
    np.testing.assert_array_equal(bits.cpu().numpy(), cpu_bits)
    expected = np.array([_decode_e4b15(int(c)) for c in cpu_bits], np.float32)
    np.testing.assert_array_equal(back.cpu().numpy(), expected)


@tl.core._aggregate
class Pair:
    lo: tl.tensor
    hi: tl.tensor

    def __init__(self, lo, hi):
        self.lo = lo
        self.hi = hi

    @tessera.jit
    def weighted(self, w):
        return self.lo * w + self.hi


@tessera.jit
def pair_kernel(a_ptr, b_ptr, out_ptr, n, w, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    p = Pair(tl.load(a_ptr + offs, mask=mask), tl.load(b_ptr + offs, mask=mask))
    tl.store(out_ptr + offs, p.weighted(w), mask=mask)


@pytest.mark.parametrize("n", [1, 300, 1000])
def test_aggregate(n):
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(a)
    pair_kernel[(triton_cdiv(n, 128),)](a, b, out, n, 0.75, BLOCK=128)
    expected = a.cpu().numpy().astype(np.float64) * 0.75 + b.cpu().numpy()
    np.testing.assert_allclose(out.cpu().numpy(), expected, rtol=1e-6, atol=1e-6)
