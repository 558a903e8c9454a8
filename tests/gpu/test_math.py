"""Math functions on the GPU against float64 references, on fresh random inputs.

Each result is compared in units of the last place (ulp) with the float64 function. The bounds
are the accuracy of the instruction or library each lowering uses (lower_math.cpp): exact for
floor, ceil, abs, fma; correctly rounded (bit-equal to the float64 result rounded to fp32, which
for sqrt and division is the exact result rounded once) for sqrt_rn and div_rn; 2 ulp for
ex2.approx/sqrt.approx/div.full and libdevice's sinf, cosf, erff, tanhf; 1 ulp for logf and
log2f; exp is ex2.approx(x * log2 e), whose product rounding adds about |x| * 1.5 ulp as in
Triton. fp16/bf16 compute in fp32 and round once more: within 1 ulp of their own type.
Outputs are poisoned (NaN) before each launch; sizes are not multiples of the block.
"""
import math
import struct
from fractions import Fraction

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import tessera
import tessera.language as tl

N = 10007
TORCH_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16,
                "fp64": torch.float64}


@tessera.jit
def unary_kernel(x_ptr, y_ptr, n, NAME: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=1.0)
    tl.store(y_ptr + offs, getattr(tl.math, NAME)(x), mask=mask)


@tessera.jit
def ternary_kernel(x_ptr, y_ptr, z_ptr, out_ptr, n, NAME: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    z = tl.load(z_ptr + offs, mask=mask)
    if NAME == "fma":
        r = tl.fma(x, y, z)
    elif NAME == "fdiv":
        r = tl.fdiv(x, y)
    elif NAME == "div_rn":
        r = tl.div_rn(x, y)
    elif NAME == "clamp":
        r = tl.clamp(x, -tl.abs(y), tl.abs(y))
    elif NAME == "umulhi":
        r = tl.umulhi(x, y)
    else:
        r = tl.sigmoid(x)
    tl.store(out_ptr + offs, r, mask=mask)


def samples(kind: str, generator) -> torch.Tensor:
    """float64 inputs on the GPU: a function's useful domain, plus a few exact cases."""
    u = torch.rand(N, dtype=torch.float64, device="cuda", generator=generator)
    if kind == "positive":
        return torch.exp(u * 40 - 20)
    if kind == "exp":
        return u * 40 - 20
    return torch.randn(N, dtype=torch.float64, device="cuda", generator=generator) * torch.exp(
        u * 6 - 3)


REFERENCES = {  # name -> (float64 function, input kind, ulp bound for fp32)
    "exp": (torch.exp, "exp", None), "exp2": (torch.exp2, "exp", 2),
    "log": (torch.log, "positive", 1), "log2": (torch.log2, "positive", 1),
    "sqrt": (torch.sqrt, "positive", 2), "sqrt_rn": (torch.sqrt, "positive", 0),
    "rsqrt": (torch.rsqrt, "positive", 2), "sin": (torch.sin, "wide", 2),
    "cos": (torch.cos, "wide", 2), "erf": (torch.erf, "wide", 2), "tanh": (torch.tanh, "wide", 2),
    "floor": (torch.floor, "wide", 0), "ceil": (torch.ceil, "wide", 0),
    "abs": (torch.abs, "wide", 0),
}


def ulps(out: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """|out - ref| in ulps of the rounded reference (its spacing in out's type)."""
    info = torch.finfo(out.dtype)
    exact = ref.to(out.dtype).double()
    spacing = torch.clamp(exact.abs(), min=info.tiny) * info.eps
    return (out.double() - ref).abs() / spacing


def run_unary(name: str, dtype: str, x64: torch.Tensor) -> torch.Tensor:
    x = x64.to(TORCH_DTYPES[dtype])
    y = torch.full_like(x, float("nan"))
    unary_kernel[(tessera.cdiv(N, 1024),)](x, y, N, NAME=name, BLOCK=1024)
    return x, y


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_fp32_within_the_instruction_accuracy(name):
    generator = torch.Generator(device="cuda").manual_seed(hash(name) % 2**31)
    fn, kind, bound = REFERENCES[name]
    x, y = run_unary(name, "fp32", samples(kind, generator))
    reference = fn(x.double())
    if bound == 0:  # correctly rounded (sqrt.rn) or exact: the rounded reference, bit for bit
        # (ulps() measures from the unrounded value, where correct rounding is up to 0.5 off)
        assert torch.equal(y, reference.float()), (name, x[y != reference.float()][:4])
        return
    error = ulps(y, reference)
    if bound is None:  # exp: the rounding of x * log2(e) grows with |x|
        bound = 2 + 1.5 * x.double().abs()
    assert torch.all(error <= bound), (name, float(error.max()), float(x[error.argmax()]))


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("name", ["exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos",
                                  "erf", "tanh", "floor", "abs"])
def test_fp16_bf16_round_the_fp32_result(name, dtype):
    generator = torch.Generator(device="cuda").manual_seed(hash((name, dtype)) % 2**31)
    fn, kind, _ = REFERENCES[name]
    x64 = samples(kind, generator)
    if kind == "positive":
        x64 = torch.clamp(x64, 1e-4, 6e4)  # within fp16's normal range
    if kind == "exp":
        x64 = x64 / 2
    x, y = run_unary(name, dtype, x64)
    ref = fn(x.double())
    finite = torch.isfinite(ref.to(y.dtype))
    assert torch.all(ulps(y, ref)[finite] <= 1), name
    assert torch.equal(torch.isinf(y), ~finite)


def test_denormals_as_triton():
    """Triton 3.6's f32 fast paths: exp keeps a denormal result, exp2 flushes it to 0; sqrt
    and rsqrt read a denormal input as 0 (the .ftz of their instructions)."""
    cases = {"exp": (-100.0, True), "exp2": (-140.0, False), "sqrt": (1e-40, False),
             "rsqrt": (1e-40, None)}
    for name, (value, denormal_kept) in cases.items():
        x = torch.tensor([value] * 4, dtype=torch.float32, device="cuda")
        y = torch.full_like(x, float("nan"))
        unary_kernel[(1,)](x, y, 4, NAME=name, BLOCK=32)
        if name == "rsqrt":
            assert torch.all(torch.isinf(y)), y  # 1 / sqrt(0)
        elif denormal_kept:
            assert torch.all((y > 0) & (y < torch.finfo(torch.float32).tiny)), (name, y)
        else:
            assert torch.all(y == 0), (name, y)


@pytest.mark.parametrize("name", ["exp", "log", "sin", "erf", "tanh", "sqrt", "rsqrt"])
def test_fp64_uses_libdevice(name):
    generator = torch.Generator(device="cuda").manual_seed(7)
    fn, kind, _ = REFERENCES[name]
    x, y = run_unary(name, "fp64", samples(kind, generator))
    bound = 2 ** -23 if name == "rsqrt" else 2e-15  # rsqrt.approx.f64 is a first approximation
    assert torch.allclose(y, fn(x), rtol=bound, atol=0), name


def round_to_f32(value: Fraction) -> float:
    """An exact rational rounded once to f32: through a double rounded to odd (53 bits are
    enough for one more rounding to 24 to be correct)."""
    double = float(value)
    if Fraction(double) != value:
        if abs(Fraction(double)) > abs(value):
            double = math.nextafter(double, 0.0)
        double = struct.unpack("<d", struct.pack("<Q", struct.unpack("<Q", struct.pack(
            "<d", double))[0] | 1))[0]
    return float(torch.tensor(double, dtype=torch.float64).float())


def run_ternary(name, x, y, z):
    out = torch.full_like(x, float("nan")) if x.is_floating_point() else torch.full_like(x, -7)
    if name in ("sigmoid", "fdiv") and x.dtype != torch.float32:
        out = out.float()
    ternary_kernel[(tessera.cdiv(N, 512),)](x, y, z, out, N, NAME=name, BLOCK=512)
    return out


def test_fma_div_clamp_sigmoid_fp32():
    g = torch.Generator(device="cuda").manual_seed(3)
    x, y, z = (torch.randn(N, device="cuda", generator=g) * 10 for _ in range(3))
    xd, yd, zd = x.double(), y.double(), z.double()
    fma = run_ternary("fma", x, y, z)
    exact = [Fraction(a) * Fraction(b) + Fraction(c)
             for a, b, c in zip(xd.tolist(), yd.tolist(), zd.tolist())]
    assert fma.cpu().tolist() == [round_to_f32(v) for v in exact]  # one rounding, exactly
    assert torch.equal(run_ternary("div_rn", x, y, z), (xd / yd).float())
    assert torch.all(ulps(run_ternary("fdiv", x, y, z), xd / yd) <= 2)
    bound = yd.abs()
    assert torch.equal(run_ternary("clamp", x, y, z).double(), torch.clamp(xd, -bound, bound))
    sigmoid = run_ternary("sigmoid", x, y, z)
    assert torch.allclose(sigmoid.double(), torch.sigmoid(xd), rtol=1e-6, atol=1e-7)


def test_umulhi():
    g = torch.Generator(device="cuda").manual_seed(5)
    for dtype, bits in ((torch.int32, 32), (torch.int64, 64)):
        info = torch.iinfo(dtype)
        x, y = (torch.randint(info.min, info.max, (N,), dtype=dtype, device="cuda", generator=g)
                for _ in range(2))
        out = run_ternary("umulhi", x, y, x)
        mask = (1 << bits) - 1
        expected = [((int(a) & mask) * (int(b) & mask)) >> bits for a, b in
                    zip(x.cpu().tolist(), y.cpu().tolist())]
        got = [int(v) & mask for v in out.cpu().tolist()]
        assert got == expected, dtype
