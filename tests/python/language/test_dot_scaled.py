"""tl.dot_scaled (Triton 3.6's microscaling dot): e2m1 / e4m3 / e5m2 / bf16 / fp16 operands
(raw uint8/uint16 or typed), e8m0 and fp8e4nv scales, None scales, NaN scale codes, an
accumulator, fp4 packed along M / N. Interpreter against a float64 NumPy reference (within
float32 accumulation error); compiled for sm_80 / sm_90a through ptxas."""
import ml_dtypes
import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.compiler import ptxas

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


@tessera.jit
def scaled_kernel(a_ptr, sa_ptr, b_ptr, sb_ptr, acc_ptr, c_ptr, M: tl.constexpr,
                  N: tl.constexpr, K: tl.constexpr, A_ROWS: tl.constexpr, A_COLS: tl.constexpr,
                  B_ROWS: tl.constexpr, B_COLS: tl.constexpr, AF: tl.constexpr,
                  BF: tl.constexpr, A_KPACK: tl.constexpr, B_KPACK: tl.constexpr,
                  SCALES: tl.constexpr, SG: tl.constexpr, ACC: tl.constexpr):
    a = tl.load(a_ptr + tl.arange(0, A_ROWS)[:, None] * A_COLS + tl.arange(0, A_COLS)[None, :])
    b = tl.load(b_ptr + tl.arange(0, B_ROWS)[:, None] * B_COLS + tl.arange(0, B_COLS)[None, :])
    sa = None
    sb = None
    if SCALES:
        sa = tl.load(sa_ptr + tl.arange(0, M)[:, None] * (K // SG) + tl.arange(0, K // SG)[None, :])
        sb = tl.load(sb_ptr + tl.arange(0, N)[:, None] * (K // SG) + tl.arange(0, K // SG)[None, :])
    acc = None
    if ACC:
        acc = tl.load(acc_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    c = tl.dot_scaled(a, sa, AF, b, sb, BF, acc, lhs_k_pack=A_KPACK, rhs_k_pack=B_KPACK)
    tl.store(c_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :], c)


def _operand(rng, fmt, rows, cols, packed_axis):
    """(array as passed, float64 values [rows, cols] unpacked)."""
    if fmt == "e2m1":
        shape = [rows, cols]
        shape[packed_axis] //= 2
        raw = rng.integers(0, 256, shape).astype(np.uint8)
        low, high = E2M1[raw & 15], E2M1[raw >> 4]
        values = np.stack([low, high], axis=packed_axis + 1).reshape(rows, cols)
        return raw, values
    if fmt in ("e4m3", "e5m2"):
        kind = ml_dtypes.float8_e4m3fn if fmt == "e4m3" else ml_dtypes.float8_e5m2
        values = rng.standard_normal((rows, cols)).astype(kind)
        raw = values.view(np.uint8)
        return raw, values.astype(np.float64)
    kind = ml_dtypes.bfloat16 if fmt == "bf16" else np.float16
    values = rng.standard_normal((rows, cols)).astype(kind)
    return values.view(np.uint16), values.astype(np.float64)


def _case(af, bf, a_kpack=True, b_kpack=True, scales="e8m0", acc=False, nan_row=None):
    rng = np.random.default_rng()
    M, N, K = 32, 16, 64
    a_raw, a = _operand(rng, af, M, K, 1 if a_kpack else 0)
    b_raw, b = _operand(rng, bf, K, N, 0 if b_kpack else 1)
    group = 16 if scales == "e4m3" else 32
    if scales == "e4m3":
        sa_t = (2.0 ** rng.integers(-3, 4, (M, K // group))).astype(ml_dtypes.float8_e4m3fn)
        sb_t = (2.0 ** rng.integers(-3, 4, (N, K // group))).astype(ml_dtypes.float8_e4m3fn)
        sa, sb = sa_t, sb_t
        fa, fb = sa_t.astype(np.float64), sb_t.astype(np.float64)
    else:
        sa = rng.integers(117, 137, (M, K // group)).astype(np.uint8)
        sb = rng.integers(117, 137, (N, K // group)).astype(np.uint8)
        sa[0, 0] = 0  # the code 0 is 2**-127 (a float32 subnormal)
        if nan_row is not None:
            sa[nan_row, 1] = 255
        fa = np.where(sa == 255, np.nan, 2.0 ** (sa.astype(np.float64) - 127))
        fb = 2.0 ** (sb.astype(np.float64) - 127)
    if scales:
        a = a * np.repeat(fa, group, axis=1)
        b = b * np.repeat(fb, group, axis=1).T
    c0 = rng.standard_normal((M, N)).astype(np.float32)
    expected = a @ b + (c0 if acc else 0)
    bound = np.abs(a) @ np.abs(b) * K * 2.0 ** -23 + (np.abs(c0) * 2.0 ** -23 if acc else 0)
    args = dict(M=M, N=N, K=K, A_ROWS=a_raw.shape[0], A_COLS=a_raw.shape[1],
                B_ROWS=b_raw.shape[0], B_COLS=b_raw.shape[1], AF=af, BF=bf, A_KPACK=a_kpack,
                B_KPACK=b_kpack, SCALES=bool(scales), SG=group, ACC=acc)
    return (a_raw, sa, b_raw, sb, c0, np.zeros((M, N), np.float32)), args, expected, bound


CASES = [("e2m1", "e4m3", {}), ("e4m3", "e5m2", {}), ("e5m2", "e2m1", {"b_kpack": False}),
         ("e2m1", "e2m1", {"a_kpack": False, "acc": True}), ("bf16", "e4m3", {}),
         ("fp16", "bf16", {"acc": True}), ("e4m3", "e4m3", {"scales": None}),
         ("e2m1", "e2m1", {"scales": "e4m3"}), ("e4m3", "e2m1", {"nan_row": 5})]


@pytest.mark.parametrize("af,bf,options", CASES)
def test_dot_scaled_interpreted(af, bf, options):
    arrays, args, expected, bound = _case(af, bf, **options)
    tessera.jit(scaled_kernel.fn, interpret=True)[(1,)](*arrays, **args)
    c = arrays[-1]
    finite = np.isfinite(expected)
    assert np.all(np.abs(c[finite] - expected[finite]) <= bound[finite] + 1e-30)
    np.testing.assert_array_equal(np.isnan(c), np.isnan(expected))
    if options.get("nan_row") is not None:
        assert np.isnan(c[options["nan_row"]]).all() and np.isfinite(np.delete(c, 5, 0)).all()


def test_dot_scaled_typed_fp8_operands():
    """Operands given in their fp8 dtypes (not uint8) give the same result."""
    arrays, args, expected, bound = _case("e4m3", "e5m2", scales=None)
    typed = (arrays[0].view(ml_dtypes.float8_e4m3fn), arrays[1],
             arrays[2].view(ml_dtypes.float8_e5m2)) + arrays[3:]
    tessera.jit(scaled_kernel.fn, interpret=True)[(1,)](*typed, **args)
    assert np.all(np.abs(typed[-1] - expected) <= bound + 1e-30)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("af,bf,options", CASES[:3] + CASES[5:6])
def test_dot_scaled_compiles(af, bf, options, arch):
    arrays, args, _, _ = _case(af, bf, **options)
    stages = scaled_kernel.asm(*arrays, **args, arch=arch)
    if af != "fp16" and bf != "fp16":  # bfloat16 tensor-core products
        assert "mma" in stages["ptx"]
    if ptxas.find_ptxas() is not None:
        assert "cubin" in stages


@tessera.jit(interpret=True)
def bad_scaled(a_ptr, s_ptr, WHICH: tl.constexpr):
    a = tl.load(a_ptr + tl.arange(0, 32)[:, None] * 32 + tl.arange(0, 32)[None, :])
    s = tl.load(s_ptr + tl.arange(0, 32)[:, None] + tl.arange(0, 2)[None, :])
    if WHICH == 0:
        tl.dot_scaled(a, None, "e3m2", a, None, "e4m3")
    elif WHICH == 1:
        tl.dot_scaled(a, s, "e4m3", a, None, "e4m3")
    else:
        tl.dot_scaled(a, None, "e4m3", a, None, "e4m3", lhs_k_pack=False)


@pytest.mark.parametrize("which,message", [(0, "lhs_format must be one of"),
                                           (1, "lhs_scale must be a tensor of shape"),
                                           (2, "only e2m1 lhs can be packed")])
def test_dot_scaled_errors(which, message):
    with pytest.raises(tessera.CompilationError, match=message):
        bad_scaled[(1,)](np.zeros(32 * 32, np.uint8), np.zeros(64, np.uint8), WHICH=which)
