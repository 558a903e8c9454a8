# Reductions and scans run by the interpreter against NumPy float64 references, on fresh random
# inputs (the `rng` fixture), with masked loads (other=0, -inf, +inf) on shapes that are not
# multiples of the block, 1-D/2-D/3-D tiles along each axis, and user combine functions
# (including a non-commutative one: the first-order linear recurrence as a tuple scan).
import ml_dtypes
import numpy as np
import pytest
import tessera
import tessera.language as tl
from tessera import frontend, interpreter

TOLERANCE = {np.float32: 1e-5, np.float16: 5e-3, ml_dtypes.bfloat16: 1e-2}
SIG = {np.float32: "fp32", np.float16: "fp16", ml_dtypes.bfloat16: "bf16", np.int32: "i32",
       np.int8: "i8", np.int64: "i64"}


def run(fn, signature, grid, args, **constexprs):
    module = frontend.build_module(fn, signature, constexprs)
    interpreter.run(module, grid, args)


def assert_close(out, ref, dtype):
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    assert not np.isnan(out).any()
    error = np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30)
    assert error <= TOLERANCE[dtype], f"relative error {error}"


def random_values(rng, shape, dtype):
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-100, 100, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def row_reduce_kernel(x_ptr, out_ptr, idx_ptr, M, N, OP: tl.constexpr, BM: tl.constexpr,
                      BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    offsets = rows[:, None] * N + cols[None, :]
    if OP == "sum":
        r = tl.sum(tl.load(x_ptr + offsets, mask=mask, other=0.0), axis=1)
    elif OP == "sum_fp32":
        r = tl.sum(tl.load(x_ptr + offsets, mask=mask, other=0.0), axis=1, dtype=tl.float32)
    elif OP == "max":
        r, i = tl.max(tl.load(x_ptr + offsets, mask=mask, other=-float("inf")), axis=1,
                      return_indices=True)
        tl.store(idx_ptr + rows, i, mask=rows < M)
    else:
        x = tl.load(x_ptr + offsets, mask=mask, other=float("inf"))
        r = x.min(1)
        tl.store(idx_ptr + rows, x.argmin(1), mask=rows < M)
    tl.store(out_ptr + rows, r, mask=rows < M)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("op", ["sum", "sum_fp32", "max", "min"])
@pytest.mark.parametrize("shape", [(1, 1), (5, 37), (67, 100), (3, 128)])
def test_row_reductions_with_masks(rng, shape, op, dtype):
    m, n = shape
    x = random_values(rng, shape, dtype)
    out_dtype = np.float32 if op in ("max", "min") or op == "sum_fp32" else dtype
    out = np.full(m, np.nan, out_dtype)
    idx = np.full(m, -1, np.int32)
    signature = {"x_ptr": "*" + SIG[dtype], "out_ptr": "*" + SIG[np.dtype(out_dtype).type],
                 "idx_ptr": "*i32", "M": "i32", "N": "i32"}
    run(row_reduce_kernel, signature, (tessera.cdiv(m, 16),), [x, out, idx, m, n],
        OP=op, BM=16, BN=128)
    x64 = x.astype(np.float64)
    if op == "sum" and dtype != np.float32:
        # Accumulated in fp16/bf16 itself (Triton's rule): rounding errors scale with the sum of
        # magnitudes, not with the (possibly cancelling) sum, so bound them by that.
        error = np.linalg.norm(np.asarray(out, np.float64) - x64.sum(1))
        assert error <= TOLERANCE[dtype] * np.linalg.norm(np.abs(x64).sum(1)), error
    elif op.startswith("sum"):
        assert_close(out, x64.sum(1), np.float32 if op == "sum_fp32" else dtype)
    else:
        ref = x64.max(1) if op == "max" else x64.min(1)
        np.testing.assert_array_equal(out, ref.astype(np.float32))  # exact: picks an element
        np.testing.assert_array_equal(idx, x64.argmax(1) if op == "max" else x64.argmin(1))


def argmax_ties_kernel(x_ptr, out_ptr, AXIS: tl.constexpr, TIE_LEFT: tl.constexpr,
                       B0: tl.constexpr, B1: tl.constexpr, B2: tl.constexpr):
    offsets = (tl.arange(0, B0)[:, None, None] * (B1 * B2) + tl.arange(0, B1)[None, :, None] * B2
               + tl.arange(0, B2)[None, None, :])
    x = tl.load(x_ptr + offsets)
    i = tl.argmax(x, AXIS, tie_break_left=TIE_LEFT)
    j = tl.argmin(x, AXIS)
    if AXIS == 0:
        out = tl.arange(0, B1)[:, None] * B2 + tl.arange(0, B2)[None, :]
    elif AXIS == 1:
        out = tl.arange(0, B0)[:, None] * B2 + tl.arange(0, B2)[None, :]
    else:
        out = tl.arange(0, B0)[:, None] * B1 + tl.arange(0, B1)[None, :]
    tl.store(out_ptr + out, i)
    tl.store(out_ptr + B0 * B1 * B2 + out, j)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_argmax_argmin_ties_pick_the_first_index(rng, axis):
    shape = (4, 8, 16)
    x = rng.integers(0, 3, shape).astype(np.int32)  # many ties
    out = np.full(2 * x.size, -1, np.int32)
    run(argmax_ties_kernel, {"x_ptr": "*i32", "out_ptr": "*i32"}, (1,), [x, out], AXIS=axis,
        TIE_LEFT=True, B0=4, B1=8, B2=16)
    reduced = x.size // shape[axis]
    np.testing.assert_array_equal(out[:reduced], x.argmax(axis).reshape(-1))  # first maximum
    np.testing.assert_array_equal(out[x.size:x.size + reduced], x.argmin(axis).reshape(-1))


def tile_kernel(x_ptr, out_ptr, AXIS: tl.constexpr, OP: tl.constexpr, KEEP: tl.constexpr,
                B0: tl.constexpr, B1: tl.constexpr, B2: tl.constexpr):
    offsets = (tl.arange(0, B0)[:, None, None] * (B1 * B2) + tl.arange(0, B1)[None, :, None] * B2
               + tl.arange(0, B2)[None, None, :])
    x = tl.load(x_ptr + offsets)
    if OP == "sum":
        r = tl.sum(x, AXIS, keep_dims=KEEP)
    elif OP == "max":
        r = tl.max(x, AXIS, keep_dims=KEEP)
    else:
        r = tl.xor_sum(x, AXIS, keep_dims=KEEP)
    if KEEP:  # keep_dims: the result broadcasts back against x
        tl.store(out_ptr + offsets, x - r)
    else:
        tl.store(out_ptr + tl.arange(0, 1), tl.full([1], 0, x.dtype) + r)


@pytest.mark.parametrize("op, dtype", [("sum", np.float32), ("max", np.float32),
                                       ("sum", np.int32), ("xor_sum", np.int32)])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_3d_reductions_keep_dims(rng, op, dtype, axis):
    shape = (2, 8, 4)
    x = random_values(rng, shape, dtype)
    out = np.zeros(shape, dtype)
    run(tile_kernel, {"x_ptr": "*" + SIG[dtype], "out_ptr": "*" + SIG[dtype]}, (1,), [x, out],
        AXIS=axis, OP=op, KEEP=True, B0=2, B1=8, B2=4)
    if op == "xor_sum":
        ref = x - np.bitwise_xor.reduce(x, axis=axis, keepdims=True)
    elif op == "max":
        ref = x - x.max(axis=axis, keepdims=True)
    else:
        ref = x.astype(np.float64) - x.astype(np.float64).sum(axis=axis, keepdims=True)
    if dtype == np.float32:
        assert_close(out, ref, dtype)
    else:
        np.testing.assert_array_equal(out, ref.astype(dtype))


@pytest.mark.parametrize("op, dtype", [("sum", np.float32), ("max", np.float32),
                                       ("sum", np.int32), ("xor_sum", np.int64)])
def test_axis_none_reduces_everything(rng, op, dtype):
    x = random_values(rng, (2, 8, 4), dtype)
    out = np.zeros(1, dtype)
    run(tile_kernel, {"x_ptr": "*" + SIG[dtype], "out_ptr": "*" + SIG[dtype]}, (1,), [x, out],
        AXIS=None, OP=op, KEEP=False, B0=2, B1=8, B2=4)
    if op == "sum" and dtype == np.float32:
        assert_close(out, [x.astype(np.float64).sum()], dtype)
    else:
        ref = {"sum": np.sum, "max": np.max, "xor_sum": np.bitwise_xor.reduce}[op](x.reshape(-1))
        np.testing.assert_array_equal(out, [ref])


def int8_sum_kernel(x_ptr, out_ptr):
    x = tl.load(x_ptr + tl.arange(0, 64))
    tl.store(out_ptr, tl.sum(x, axis=0))


def test_int8_sum_widens(rng):
    x = rng.integers(100, 128, 64).astype(np.int8)  # the int8 sum would wrap
    out = np.zeros(1, np.int32)
    run(int8_sum_kernel, {"x_ptr": "*i8", "out_ptr": "*i32"}, (1,), [x, out])
    assert out[0] == x.astype(np.int64).sum()


@tessera.jit
def linear_recurrence(a1, b1, a2, b2):
    # (a1, b1) then (a2, b2): h -> a2 * (a1 * h + b1) + b2. Associative, not commutative.
    return a1 * a2, b1 * a2 + b2


@tessera.jit
def add(a, b):
    return a + b


def scan_kernel(x_ptr, a_ptr, out_ptr, M, N, AXIS: tl.constexpr, OP: tl.constexpr,
                REVERSE: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                OTHER: tl.constexpr):
    rows = tl.arange(0, BM)[:, None]
    cols = tl.arange(0, BN)[None, :]
    mask = (rows < M) & (cols < N)
    offsets = rows * N + cols
    x = tl.load(x_ptr + offsets, mask=mask, other=OTHER)  # the identity: padding is harmless
    if OP == "cumsum":
        y = tl.cumsum(x, AXIS, reverse=REVERSE)
    elif OP == "cumprod":
        y = x.cumprod(AXIS, reverse=REVERSE)
    elif OP == "user":
        y = tl.associative_scan(x, AXIS, add, reverse=REVERSE)
    else:
        a = tl.load(a_ptr + offsets, mask=mask, other=1.0)
        _, y = tl.associative_scan((a, x), AXIS, linear_recurrence, reverse=REVERSE)
    tl.store(out_ptr + offsets, y, mask=mask)


def scan_reference(x, a, op, axis, reverse):
    x, a = x.astype(np.float64), a.astype(np.float64)
    if reverse:
        return np.flip(scan_reference(np.flip(x, axis), np.flip(a, axis), op, axis, False), axis)
    if op in ("cumsum", "user"):
        return np.cumsum(x, axis)
    if op == "cumprod":
        return np.cumprod(x, axis)
    out = np.zeros_like(x)  # h[i] = a[i] * h[i-1] + x[i], h[-1] = 0
    h = np.zeros(x.shape[1 - axis])
    for i in range(x.shape[axis]):
        index = (i, slice(None)) if axis == 0 else (slice(None), i)
        h = a[index] * h + x[index]
        out[index] = h
    return out


@pytest.mark.parametrize("op", ["cumsum", "cumprod", "user", "recurrence"])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("reverse", [False, True])
def test_scans(rng, op, axis, reverse):
    m, n = 13, 29  # the block is 16 x 32: masked rows and columns
    x = rng.standard_normal((m, n)).astype(np.float32)
    if op == "cumprod":
        x = rng.uniform(0.8, 1.25, (m, n)).astype(np.float32)
    a = rng.uniform(-1, 1, (m, n)).astype(np.float32)
    out = np.full((m, n), np.nan, np.float32)
    run(scan_kernel, {"x_ptr": "*fp32", "a_ptr": "*fp32", "out_ptr": "*fp32", "M": "i32",
                      "N": "i32"}, (1,), [x, a, out, m, n], AXIS=axis, OP=op, REVERSE=reverse,
        BM=16, BN=32, OTHER=1.0 if op == "cumprod" else 0.0)
    assert_close(out, scan_reference(x, a, op, axis, reverse), np.float32)


def test_integer_cumsum_is_exact(rng):
    x = rng.integers(-2**20, 2**20, (13, 29)).astype(np.int32)
    out = np.zeros_like(x)
    # The float kernel reads int32 bits as fp32 (same width), so write a dedicated one.
    run(int_scan_kernel, {"x_ptr": "*i32", "out_ptr": "*i32"}, (1,), [x, out], M=13, N=29)
    np.testing.assert_array_equal(out, np.cumsum(x, 1))


def int_scan_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    rows = tl.arange(0, 16)[:, None]
    cols = tl.arange(0, 32)[None, :]
    mask = (rows < M) & (cols < N)
    x = tl.load(x_ptr + rows * N + cols, mask=mask, other=0)
    tl.store(out_ptr + rows * N + cols, tl.cumsum(x, 1), mask=mask)


def test_reduce_inside_a_loop(rng):
    # Row sums of a wide matrix, one column block per iteration, accumulated in a loop.
    m, n = 5, 300
    x = rng.standard_normal((m, n)).astype(np.float32)
    out = np.zeros(m, np.float32)
    run(looped_sum_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "M": "i32", "N": "i32"},
        (1,), [x, out, m, n], BM=8, BN=64)
    assert_close(out, x.astype(np.float64).sum(1), np.float32)


def looped_sum_kernel(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.arange(0, BM)
    acc = tl.zeros([BM], tl.float32)
    for start in range(0, N, BN):
        cols = start + tl.arange(0, BN)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        acc += tl.sum(tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=mask, other=0.0),
                      axis=1)
    tl.store(out_ptr + rows, acc, mask=rows < M)
