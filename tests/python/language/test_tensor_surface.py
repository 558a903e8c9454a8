"""Triton's tensor methods, dtype attributes and the small shape builtins (view, ravel,
broadcast, item, reshape/expand_dims forms, trans defaults, swizzle2d, reduce_or, add/sub/mul,
tl.range's hints), run by the interpreter against NumPy; and their errors, which name the
kernel and the source line.
"""
import os
import secrets

import ml_dtypes
import numpy as np
import pytest
import tessera
import tessera.language as tl
from tessera.language import dtype_table, tensor_methods


@pytest.fixture
def rng():
    seed = int(os.environ.get("INTERPRETER_TEST_SEED") or secrets.randbits(32))
    print(f"numpy seed: {seed}")
    return np.random.default_rng(seed)


# ---- the method table -----------------------------------------------------------------------


def test_every_method_of_the_table_is_the_language_function():
    missing = tensor_methods.missing_methods()
    assert set(missing) <= {"advance"}  # block pointers: bound once tl.advance exists
    for name in tensor_methods.TENSOR_METHODS:
        if name not in missing:
            assert getattr(tl.tensor, name) is getattr(tl, name), name
    for name in ("__add__", "__rsub__", "__invert__", "__rshift__", "logical_and", "__not__",
                 "__rlt__", "__rne__"):
        assert tl.core.is_builtin(getattr(tl.tensor, name)), name
    # Comparisons stay off the class: tensors stay hashable for the compiler's bookkeeping.
    assert tl.tensor.__eq__ is object.__eq__ and tl.tensor.__hash__ is object.__hash__


@tessera.jit(interpret=True)
def methods_kernel(x_ptr, y_ptr, out_ptr, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.arange(0, BM)[:, None]
    cols = tl.arange(0, BN)[None, :]
    x = tl.load(x_ptr + rows * BN + cols)  # int32 [BM, BN]
    y = tl.load(y_ptr + rows * BN + cols)
    results = (
        x.reshape(BM * BN).reshape([BM, BN]),
        x.trans().trans(),
        x.permute(1, 0).T,
        x.view(BN, BM).reshape(BM, BN, can_reorder=True),
        x.ravel().reshape(BM, BN),
        x.expand_dims((0, 3)).reshape(BM, BN),
        x.sum(1, keep_dims=True).broadcast_to(BM, BN),
        x.cast(tl.float32).to(tl.int32, bitcast=True),
        x.cdiv(3),
        x.logical_and(y).to(tl.int32) + x.logical_or(y).to(tl.int32) * 2,
        x.__add__(1) + x.__radd__(2) + x.__rsub__(10) + x.__mul__(3),
        x.__lt__(y).to(tl.int32) + x.__ge__(0).to(tl.int32) * 2 + x.__eq__(y).to(tl.int32) * 4,
        x.__invert__() ^ x.__neg__(),
        x.__and__(y) | x.__rxor__(5) | x.__rshift__(1) | (x & 7).__rlshift__(1),
        x.__floordiv__(7) + x.__mod__(7) + (x.abs() + 1).__rfloordiv__(1000),
        x.reduce_or(1, keep_dims=True).broadcast_to(BM, BN),
        x.flip(0),
        x.max(0, keep_dims=True).broadcast_to(BM, BN) + x.argmin(1, keep_dims=True),
        x.abs(),
        x.__rlt__(0).to(tl.int32) + x.__rge__(y).to(tl.int32) * 2 + (3 > x).to(tl.int32) * 4,
    )
    for index in tl.static_range(len(results)):
        tl.store(out_ptr + index * BM * BN + rows * BN + cols, results[index])


def methods_inputs(rng, bm=4, bn=8):
    return (rng.integers(-50, 50, (bm, bn)).astype(np.int32),
            rng.integers(-2, 3, (bm, bn)).astype(np.int32))


def methods_reference(x, y):
    """NumPy's value of each row of methods_kernel's results."""
    c_div = lambda a, b: np.trunc(a / b).astype(np.int32)  # noqa: E731 (C division)
    c_mod = lambda a, b: a - c_div(a, b) * b  # noqa: E731
    return [
        x, x, x, x, x, x, np.broadcast_to(x.sum(1, keepdims=True), x.shape),
        x.astype(np.float32).view(np.int32), c_div(x + 2, 3),
        ((x != 0) & (y != 0)) + ((x != 0) | (y != 0)) * 2,
        (x + 1) + (2 + x) + (10 - x) + x * 3,
        (x < y) + (x >= 0) * 2 + (x == y) * 4,
        ~x ^ -x,
        (x & y) | (5 ^ x) | (x >> 1) | (1 << (x & 7)),
        c_div(x, 7) + c_mod(x, 7) + c_div(1000, np.abs(x) + 1),
        np.broadcast_to(np.bitwise_or.reduce(x, 1, keepdims=True), x.shape),
        x[::-1],
        np.broadcast_to(x.max(0, keepdims=True), x.shape) + x.argmin(1)[:, None],
        np.abs(x),
        (0 < x) + (y >= x) * 2 + (3 > x) * 4,
    ]


def test_methods_match_numpy(rng):
    x, y = methods_inputs(rng)
    out = np.zeros((20,) + x.shape, np.int32)
    methods_kernel[(1,)](x, y, out, BM=x.shape[0], BN=x.shape[1])
    for index, ref in enumerate(methods_reference(x, y)):
        np.testing.assert_array_equal(out[index], ref, err_msg=f"result {index}")


# ---- dtype attributes ------------------------------------------------------------------------

DTYPES = [tl.int1, tl.int8, tl.int16, tl.int32, tl.int64, tl.uint8, tl.uint16, tl.uint32,
          tl.uint64, tl.float8e4nv, tl.float8e5, tl.float16, tl.bfloat16, tl.float32, tl.float64]


@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_dtype_table(dt):
    for name in dtype_table.DTYPE_NAMES:  # one predicate per Triton dtype name
        assert getattr(dt, f"is_{name}")() == (dt.name == name), name
    assert dt.itemsize == dt.primitive_bitwidth // 8
    assert dt.cache_key_part == dt.name and not dt.is_block() and not dt.is_const()
    assert tl.dtype.is_dtype(dt.name) and not tl.dtype.is_dtype("fp7")
    assert repr(dt) == f"tl.{dt.codegen_name()}" and getattr(tl, dt.codegen_name()) == dt
    assert dt.with_element_ty(tl.int8) == tl.int8
    if dt.is_int():
        signed = dt.is_int_signed()
        assert dt.int_signedness == (tl.dtype.SIGNEDNESS.SIGNED if signed
                                     else tl.dtype.SIGNEDNESS.UNSIGNED)
        assert dt.mangle() == ("i" if signed else "u") + str(dt.int_bitwidth)
        with pytest.raises(AttributeError):
            dt.exponent_bias
    else:
        assert dt.mangle() == dt.name
        # The bias puts 1.0 at exponent field == bias: 2**(bits - mantissa - 2) - 1 for IEEE.
        exponent_bits = dt.primitive_bitwidth - 1 - dt.fp_mantissa_width
        expected = {"fp8e4nv": 7}.get(dt.name, 2 ** (exponent_bits - 1) - 1)
        assert dt.exponent_bias == expected


def test_kind_and_pointer_and_block_attributes():
    assert tl.dtype.KIND.BOOLEAN is tl.dtype.KIND.BOOL
    assert tl.int1.kind() < tl.int8.kind() < tl.float16.kind()
    ptr = tl.pointer_type(tl.float16, const=True)
    assert ptr.is_const() and not tl.pointer_type(tl.float16).is_const()
    assert ptr.mangle() == "Pfp16" and ptr.itemsize == 8 and ptr.scalar is ptr
    block = tl.block_type(tl.float16, [4, 8])
    assert block.is_block() and block.scalar == tl.float16 and block.get_block_shapes() == (4, 8)
    assert block.nbytes == 64 and block.numel == 32 and block.primitive_bitwidth == 16
    assert block.with_element_ty(tl.int32) == tl.block_type(tl.int32, [4, 8])
    assert block.mangle() == "fp16S4_8S"


@tessera.jit(interpret=True)
def dtype_query_kernel(x_ptr, out_ptr):
    x = tl.load(x_ptr + tl.arange(0, 4))
    tl.static_assert(x.dtype.is_int64() and not x.dtype.is_uint64() and x.dtype.itemsize == 8)
    tl.static_assert(x.type.is_block() and x.type.scalar.is_int_signed())
    if x.dtype.int_signedness == tl.dtype.SIGNEDNESS.SIGNED:
        x = x + x.dtype.primitive_bitwidth
    pointers = out_ptr + tl.arange(0, 4)
    pointers.store(x)  # memory functions are methods of pointer tensors too
    pointers.atomic_add(1, sem="relaxed")


def test_dtype_queries_inside_a_kernel(rng):
    x = rng.integers(-100, 100, 4).astype(np.int64)
    out = np.zeros_like(x)
    dtype_query_kernel[(1,)](x, out)
    np.testing.assert_array_equal(out, x + 65)


# ---- small shape builtins --------------------------------------------------------------------


@tessera.jit(interpret=True)
def shapes_kernel(x_ptr, out_ptr, scalar_ptr, B0: tl.constexpr, B1: tl.constexpr,
                  B2: tl.constexpr):
    offs = (tl.arange(0, B0)[:, None, None] * (B1 * B2) + tl.arange(0, B1)[None, :, None] * B2
            + tl.arange(0, B2)[None, None, :])
    x = tl.load(x_ptr + offs)
    tl.static_assert(x.shape == (B0, B1, B2) and x.shape[:-1] + (1,) == [B0, B1, 1])
    tl.static_assert((B0,) + x.shape[1:] == x.shape and x.numel == B0 * B1 * B2)
    swapped_offs = (tl.arange(0, B0)[:, None, None] * (B1 * B2)
                    + tl.arange(0, B2)[None, :, None] * B1 + tl.arange(0, B1)[None, None, :])
    tl.store(out_ptr + swapped_offs, tl.trans(x))  # the last two dims swap, as Triton's
    flat = tl.ravel(x, can_reorder=True)
    tl.store(scalar_ptr, tl.reshape(tl.max(flat, 0, keep_dims=True), []))  # [] -> a scalar
    tl.store(scalar_ptr + 1, tl.sum(flat, 0, keep_dims=True).item())
    a, b = tl.broadcast(tl.arange(0, 4)[:, None], tl.arange(0, 2)[None, :])
    tl.store(scalar_ptr + 2 + tl.arange(0, 4)[:, None] * 2 + tl.arange(0, 2)[None, :],
             a * 10 + b)
    wide = tl.expand_dims(tl.arange(0, 4), (0, -1))  # axes of the result: [1, 4, 1]
    tl.static_assert(wide.shape[0] == 1 and wide.shape[1] == 4 and wide.shape[2] == 1)
    tl.store(scalar_ptr + 10 + tl.arange(0, 4), tl.view(wide, 4))


def test_shape_builtins(rng):
    shape = (2, 4, 8)
    x = rng.integers(-1000, 1000, shape).astype(np.int32)
    out, scalars = np.zeros((2, 8, 4), np.int32), np.zeros(14, np.int32)
    shapes_kernel[(1,)](x, out, scalars, B0=2, B1=4, B2=8)
    np.testing.assert_array_equal(out, np.swapaxes(x, 1, 2))
    assert scalars[0] == x.max() and scalars[1] == x.sum()
    a, b = np.broadcast_arrays(np.arange(4)[:, None], np.arange(2)[None, :])
    np.testing.assert_array_equal(scalars[2:10].reshape(4, 2), a * 10 + b)
    np.testing.assert_array_equal(scalars[10:], np.arange(4))


@tessera.jit(interpret=True)
def standard_kernel(x_ptr, y_ptr, out_ptr, swz_ptr, n, BLOCK: tl.constexpr, G: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    y = tl.load(y_ptr + offs, mask=offs < n, other=0)
    tl.store(out_ptr + offs, tl.add(x, y) * 4 + tl.sub(x, y) * 2 + tl.mul(x, 3))
    tl.store(out_ptr + BLOCK + tl.arange(0, 1), tl.reduce_or(x, 0, keep_dims=True))
    acc = tl.zeros([BLOCK], tl.int32)
    for k in tl.range(0, 3, num_stages=2, loop_unroll_factor=1, disallow_acc_multi_buffer=True,
                      flatten=True, warp_specialize=True):
        acc += x
    tl.store(out_ptr + BLOCK + 1 + offs, acc)
    i = tl.arange(0, 8)[:, None]
    j = tl.arange(0, 4)[None, :]
    new_i, new_j = tl.swizzle2d(i, j, 8, 4, G)  # G = 3: the last group is shorter
    tl.store(swz_ptr + i * 4 + j, new_i * 4 + new_j)
    si, sj = tl.swizzle2d(5, 3, 7, 4, G)  # numbers in: computed at compile time
    tl.store(out_ptr + 2 * BLOCK + 1, si * 4 + sj)


def swizzle_reference(i, j, size_i, size_j, size_g):
    """Column-major order within groups of size_g rows, from the definition."""
    ij = i * size_j + j
    group, within = divmod(ij, size_g * size_j)
    rows = min(size_i - group * size_g, size_g)
    return group * size_g + within % rows, within // rows


@pytest.mark.parametrize("group", [1, 2, 3, 5])
def test_standard_builtins(rng, group):
    block, n = 16, int(rng.integers(1, 17))
    x = rng.integers(0, 1 << 20, n).astype(np.int32)
    y = rng.integers(-1000, 1000, n).astype(np.int32)
    out, swz = np.zeros(2 * block + 2, np.int32), np.zeros((8, 4), np.int32)
    standard_kernel[(1,)](x, y, out, swz, n, BLOCK=block, G=group)
    xp, yp = (np.pad(v, (0, block - n)) for v in (x, y))
    np.testing.assert_array_equal(out[:block], (xp + yp) * 4 + (xp - yp) * 2 + xp * 3)
    assert out[block] == np.bitwise_or.reduce(xp)
    np.testing.assert_array_equal(out[block + 1:2 * block + 1], 3 * xp)
    new_i, new_j = swizzle_reference(5, 3, 7, 4, group)
    assert out[-1] == new_i * 4 + new_j
    for i in range(8):
        for j in range(4):
            new_i, new_j = swizzle_reference(i, j, 8, 4, group)
            assert swz[i, j] == new_i * 4 + new_j, (i, j)


def test_swizzle2d_matches_the_documented_example():
    # Triton's docstring: element (i, j) of a row-major 4 x 4 grid moves to (new_i, new_j).
    moved = np.zeros((4, 4), int)
    for i in range(4):
        for j in range(4):
            moved[swizzle_reference(i, j, 4, 4, 2)] = i * 4 + j
    assert moved.tolist() == [[0, 2, 4, 6], [1, 3, 5, 7], [8, 10, 12, 14], [9, 11, 13, 15]]


# ---- .to(fp_downcast_rounding=) -------------------------------------------------------------


@tessera.jit
def round_kernel(x_ptr, rtz_ptr, rtne_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    dst = rtz_ptr.dtype.element_ty
    tl.store(rtz_ptr + offs, x.to(dst, fp_downcast_rounding="rtz"), mask=offs < n)
    tl.store(rtne_ptr + offs, tl.cast(x, dst, fp_downcast_rounding="rtne"), mask=offs < n)


def float_specials(rng, n):
    """Normal, subnormal, huge (overflowing fp16), zero, inf and NaN float32 values."""
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 30, n))).astype(np.float32)
    x[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 65519.0, -70000.0, 1e-40]
    return x


def toward_zero_reference(x, dtype):
    """Rounding toward zero from the definition: bf16 keeps fp32's upper 16 bits (truncation);
    fp16 steps the nearest value back toward zero where it overshoots |x|."""
    if dtype == ml_dtypes.bfloat16:
        truncated = (x.view(np.uint32) >> 16).astype(np.uint16).view(ml_dtypes.bfloat16)
        return np.where(np.isnan(x), np.array(np.nan, dtype), truncated)
    with np.errstate(over="ignore", invalid="ignore"):
        nearest = x.astype(np.float16)
        over = np.abs(nearest.astype(np.float64)) > np.abs(x.astype(np.float64))
    return np.where(over, np.nextafter(nearest, np.float16(0)), nearest)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_downcast_rounding_modes(rng, dtype):
    n = 200
    x = float_specials(rng, n)
    rtz, rtne = np.zeros(n, dtype), np.zeros(n, dtype)
    round_kernel.interpret = True
    try:
        round_kernel[(1,)](x, rtz, rtne, n, BLOCK=256)
    finally:
        round_kernel.interpret = None
    ref = toward_zero_reference(x, dtype)
    np.testing.assert_array_equal(rtz.view(np.uint16)[~np.isnan(x)],
                                  ref.view(np.uint16)[~np.isnan(x)])
    assert np.isnan(rtz.astype(np.float32)[np.isnan(x)]).all()
    with np.errstate(over="ignore"):
        nearest = x.astype(dtype).astype(np.float32)
    np.testing.assert_array_equal(rtne.astype(np.float32), nearest)
