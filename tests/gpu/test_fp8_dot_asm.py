"""On the GPU against references computed on the CPU: fp8 conversions (every format, rtne and
rtz, from f32/f16/bf16/f64, back to f32) bit-exact against the interpreter's numerics (which
tests/python/interpreter/test_interpreter_fp8.py checks against exact rounding); fp8 matmuls
against float64 of the fp8 values, int8 matmuls exactly, float64 and batched dots; Triton's
inline asm example; int64 <-> pointer casts; tessera.reinterpret of uint8 tensors."""
import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import tessera
import tessera.language as tl
from tessera.interpreter import numerics as nm

FORMATS = {"float8e4nv": (ml_dtypes.float8_e4m3fn, 448.0),
           "float8e5": (ml_dtypes.float8_e5m2, 57344.0),
           "float8e4b8": (ml_dtypes.float8_e4m3fnuz, 240.0),
           "float8e5b16": (ml_dtypes.float8_e5m2fnuz, 57344.0)}
SOURCES = {"fp32": (np.float32, torch.float32), "fp16": (np.float16, torch.float16),
           "bf16": (ml_dtypes.bfloat16, torch.bfloat16), "fp64": (np.float64, torch.float64)}


@tessera.jit
def round_trip_kernel(x_ptr, codes_ptr, out_ptr, n, ROUNDING: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(codes_ptr + offs, x.to(codes_ptr.dtype.element_ty, fp_downcast_rounding=ROUNDING),
             mask=offs < n)
    tl.store(out_ptr + offs, tl.load(codes_ptr + offs, mask=offs < n).to(tl.float32),
             mask=offs < n)


def to_torch(array, dtype):
    if array.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16).cuda()
    return torch.from_numpy(array).cuda().to(dtype)


@pytest.mark.parametrize("rounding", ["rtne", "rtz"])
@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize("name", [*FORMATS, "float8e4b15"])
def test_fp8_conversions_match_the_interpreter_bit_for_bit(name, source, rounding):
    rng = np.random.default_rng(hash((name, source, rounding)) % 2**32)
    n = 5003
    np_dtype, torch_dtype = SOURCES[source]
    limit = 2.0 if name == "float8e4b15" else FORMATS[name][1]
    x = np.exp2(rng.uniform(-24, np.log2(limit) + 2, n)) * rng.choice([-1.0, 1.0], n)
    x[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, limit, -3 * limit, 1.0]
    with np.errstate(over="ignore"):
        x = x.astype(np_dtype)
    codes = torch.zeros(n, dtype=torch.uint8, device="cuda")
    out = torch.zeros(n, dtype=torch.float32, device="cuda")
    round_trip_kernel[(tessera.cdiv(n, 1024),)](
        to_torch(x, torch_dtype), tessera.reinterpret(codes, getattr(tl, name)), out, n,
        ROUNDING=rounding, BLOCK=1024)
    if name == "float8e4b15":
        expected_codes = nm.to_e4b15(x)
        expected_values = nm.from_e4b15(expected_codes)
    else:
        fmt = np.dtype(FORMATS[name][0])
        expected = nm.to_float_toward_zero(x, fmt) if rounding == "rtz" else nm.to_float(x, fmt)
        expected_codes = np.asarray(expected).view(np.uint8)
        expected_values = np.asarray(expected).astype(np.float32)
    got_codes = codes.cpu().numpy()
    nan = np.isnan(expected_values)
    np.testing.assert_array_equal(np.isnan(out.cpu().numpy()), nan)
    np.testing.assert_array_equal(got_codes[~nan], expected_codes[~nan])
    np.testing.assert_array_equal(out.cpu().numpy()[~nan], expected_values[~nan])


@tessera.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=c_ptr.dtype.element_ty)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :],
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def run_matmul(a, b, c, blocks, num_warps=4):
    m, k = a.shape
    n = b.shape[1]
    bm, bn, bk = blocks
    matmul_kernel[(tessera.cdiv(m, bm), tessera.cdiv(n, bn))](a, b, c, m, n, k, BM=bm, BN=bn,
                                                              BK=bk, num_warps=num_warps)


@pytest.mark.parametrize("shape", [(256, 256, 256), (1000, 520, 333), (129, 65, 40)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("a_dtype,b_dtype", [("e4m3fn", "e4m3fn"), ("e5m2", "e5m2"),
                                             ("e4m3fn", "e5m2")])
def test_fp8_matmul_against_float64_of_the_fp8_values(shape, a_dtype, b_dtype):
    m, n, k = shape
    gen = torch.Generator(device="cuda").manual_seed(m + n + k)
    a = torch.randn((m, k), device="cuda", generator=gen).to(getattr(torch, f"float8_{a_dtype}"))
    b = torch.randn((k, n), device="cuda", generator=gen).to(getattr(torch, f"float8_{b_dtype}"))
    c = torch.full((m, n), float("nan"), device="cuda")
    run_matmul(a, b, c, (64, 64, 64))
    ref = a.double() @ b.double()
    err = ((c.double() - ref).norm() / ref.norm()).item()
    # Exact products; float32 sums of up to 333 terms, except on sm_90 where e4m3/e5m2 run on
    # wgmma's fp8 kinds, whose accumulator keeps fewer bits (tests/gpu/test_fp8_wgmma.py).
    native = torch.cuda.get_device_capability() == (9, 0)
    assert err < (1e-2 if native else 1e-5), err


@pytest.mark.parametrize("shape", [(256, 256, 256), (1000, 520, 333)],
                         ids=lambda s: "x".join(map(str, s)))
def test_int8_matmul_is_exact(shape):
    m, n, k = shape
    gen = torch.Generator(device="cuda").manual_seed(m * 3 + k)
    a = torch.randint(-128, 128, (m, k), device="cuda", dtype=torch.int8, generator=gen)
    b = torch.randint(-128, 128, (k, n), device="cuda", dtype=torch.int8, generator=gen)
    c = torch.zeros((m, n), device="cuda", dtype=torch.int32)
    run_matmul(a, b, c, (64, 64, 32))
    ref = a.cpu().numpy().astype(np.int64) @ b.cpu().numpy().astype(np.int64)
    np.testing.assert_array_equal(c.cpu().numpy(), ref)


def test_float64_matmul():
    gen = torch.Generator(device="cuda").manual_seed(5)
    a = torch.randn((200, 130), device="cuda", dtype=torch.float64, generator=gen)
    b = torch.randn((130, 70), device="cuda", dtype=torch.float64, generator=gen)
    c = torch.zeros((200, 70), device="cuda", dtype=torch.float64)
    run_matmul(a, b, c, (32, 32, 16))
    torch.testing.assert_close(c, a @ b, rtol=1e-12, atol=1e-12)


@tessera.jit
def batched_kernel(a_ptr, b_ptr, c_ptr, B: tl.constexpr, M: tl.constexpr, N: tl.constexpr,
                   K: tl.constexpr):
    rb = tl.arange(0, B)[:, None, None]
    rm = tl.arange(0, M)[None, :, None]
    rn = tl.arange(0, N)[None, None, :]
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rb * M * K + rm * K + rk[None, None, :])
    b = tl.load(b_ptr + rb * K * N + rk[None, :, None] * N + rn)
    tl.store(c_ptr + rb * M * N + rm * N + rn, tl.dot(a, b))


@pytest.mark.parametrize("batch", [4, 16])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.int8])
def test_batched_dot(dtype, batch):
    gen = torch.Generator(device="cuda").manual_seed(11)
    if dtype == torch.int8:
        a = torch.randint(-128, 128, (batch, 16, 32), device="cuda", dtype=dtype, generator=gen)
        b = torch.randint(-128, 128, (batch, 32, 16), device="cuda", dtype=dtype, generator=gen)
        c = torch.zeros((batch, 16, 16), device="cuda", dtype=torch.int32)
    else:
        a = torch.randn((batch, 16, 32), device="cuda", generator=gen).to(dtype)
        b = torch.randn((batch, 32, 16), device="cuda", generator=gen).to(dtype)
        c = torch.zeros((batch, 16, 16), device="cuda", dtype=torch.float32)
    batched_kernel[(1,)](a, b, c, B=batch, M=16, N=16, K=32)
    if dtype == torch.float32:  # tf32 by default: the inputs rounded as the tensor cores do
        from tessera.interpreter.matrix import round_to_tf32
        a = torch.from_numpy(round_to_tf32(a.cpu().numpy()))
        b = torch.from_numpy(round_to_tf32(b.cpu().numpy()))
    ref = a.cpu().double() @ b.cpu().double()
    if dtype == torch.int8:
        assert torch.equal(c.cpu().long(), ref.long())
    else:
        torch.testing.assert_close(c.cpu().double(), ref, rtol=1e-5, atol=1e-4)


@tessera.jit
def asm_kernel(a_ptr, b_ptr, c_ptr, d_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs, mask=offs < n, other=0)
    b = tl.load(b_ptr + offs, mask=offs < n, other=0)
    (c, d) = tl.inline_asm_elementwise(
        asm="""
        {
            .reg .b8 tmp<4>;
            mov.b32 {tmp0, tmp1, tmp2, tmp3}, $8;
            cvt.u32.u8 $0, tmp0;
            cvt.u32.u8 $1, tmp1;
            cvt.u32.u8 $2, tmp2;
            cvt.u32.u8 $3, tmp3;
        }
        cvt.rn.f32.s32 $4, $0;
        cvt.rn.f32.s32 $5, $1;
        cvt.rn.f32.s32 $6, $2;
        cvt.rn.f32.s32 $7, $3;
        max.f32 $4, $4, $9;
        max.f32 $5, $5, $10;
        max.f32 $6, $6, $11;
        max.f32 $7, $7, $12;
        """,
        constraints="=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r,r",
        args=[a, b], dtype=(tl.int32, tl.float32), is_pure=True, pack=4)
    h = tl.inline_asm_elementwise("neg.f16x2 $0, $1;", "=r,r", [b.to(tl.float16)],
                                  dtype=tl.float16, is_pure=True, pack=2)
    tl.store(c_ptr + offs, c, mask=offs < n)
    tl.store(d_ptr + offs, d + h.to(tl.float32), mask=offs < n)


@pytest.mark.parametrize("block", [128, 1024])
def test_inline_asm_example(block):
    n = 3001
    gen = torch.Generator(device="cuda").manual_seed(block)
    a = torch.randint(0, 256, (n,), device="cuda", dtype=torch.uint8, generator=gen)
    b = torch.randn(n, device="cuda", generator=gen) * 200
    c = torch.zeros(n, device="cuda", dtype=torch.int32)
    d = torch.zeros(n, device="cuda")
    asm_kernel[(tessera.cdiv(n, block),)](a, b, c, d, n, BLOCK=block)
    assert torch.equal(c.cpu(), a.cpu().int())
    expected = torch.maximum(a.cpu().float(), b.cpu()) - b.cpu().half().float()
    torch.testing.assert_close(d.cpu(), expected, rtol=0, atol=0)


@tessera.jit
def gather_by_address_kernel(x_ptr, idx_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    idx = tl.load(idx_ptr + offs, mask=offs < n, other=0)
    addresses = x_ptr.to(tl.int64) + idx.to(tl.int64) * 4
    values = tl.load(addresses.to(tl.pointer_type(tl.float32)), mask=offs < n)
    tl.store(tl.cast(out_ptr, tl.pointer_type(tl.int32)) + offs, values.to(tl.int32, bitcast=True),
             mask=offs < n)


def test_int64_pointer_casts():
    n = 2000
    x = torch.randn(777, device="cuda")
    idx = torch.randint(0, 777, (n,), device="cuda", dtype=torch.int32)
    out = torch.zeros(n, device="cuda")
    gather_by_address_kernel[(tessera.cdiv(n, 512),)](x, idx, out, n, BLOCK=512)
    assert torch.equal(out, x[idx.long()])


@tessera.jit
def precision_kernel(a_ptr, b_ptr, c_ptr, M, N, K, PRECISION: tl.constexpr, BM: tl.constexpr,
                     BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :],
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@pytest.mark.parametrize("precision,bound", [("bf16x3", 2e-5), ("bf16x6", 2e-6)])
def test_bf16_split_precisions(precision, bound):
    m, n, k = 333, 129, 257
    gen = torch.Generator(device="cuda").manual_seed(3)
    a = torch.randn((m, k), device="cuda", generator=gen)
    b = torch.randn((k, n), device="cuda", generator=gen)
    c = torch.full((m, n), float("nan"), device="cuda")
    precision_kernel[(tessera.cdiv(m, 64), tessera.cdiv(n, 64))](
        a, b, c, m, n, k, PRECISION=precision, BM=64, BN=64, BK=32)
    ref = a.double() @ b.double()
    assert ((c.double() - ref).norm() / ref.norm()).item() < bound
