"""join, split, interleave, cat, gather, histogram, flip, sort, topk and bitonic_merge run by
the interpreter against NumPy, on fresh random inputs and ragged blocks (the kernels of
shape_op_kernels.py read an M x N block, masked, into a power-of-two tile).

Values move exactly (bit patterns compared, -0.0 and NaN payloads included, for the ops that
only move elements); sort and topk are compared with np.sort on inputs without ties between
-0.0 and 0.0 (the only values np.sort and a compare network may order differently).
"""
import os
import secrets

import ml_dtypes
import numpy as np
import pytest
import shape_op_kernels as K
from shape_op_kernels import bits, ragged_block, random_array, sortable

DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16, np.int32, np.int8, np.uint16, np.int64]


@pytest.fixture
def rng():
    seed = int(os.environ.get("INTERPRETER_TEST_SEED") or secrets.randbits(32))
    print(f"numpy seed: {seed}")
    return np.random.default_rng(seed)


def launch(kernel, grid, *args, **constexprs):
    kernel.interpret = True
    try:
        kernel[grid](*args, **constexprs)
    finally:
        kernel.interpret = None


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m, n, bm, bn", [(5, 7, 8, 8), (16, 3, 16, 4), (1, 30, 2, 32)])
def test_join_split_interleave_cat(rng, dtype, m, n, bm, bn):
    x, y = random_array(rng, (m, n), dtype), random_array(rng, (m, n), dtype)
    joined = np.zeros((bm, bn, 2), dtype)
    inter, cat = np.zeros((bm, 2 * bn), dtype), np.zeros((2 * bm, bn), dtype)
    a, b = np.zeros((bm, bn), dtype), np.zeros((bm, bn), dtype)
    launch(K.join_split_kernel, (1,), x, y, joined, inter, cat, a, b, m, n, BM=bm, BN=bn)
    xb, yb = ragged_block(x, bm, bn), ragged_block(y, bm, bn)
    np.testing.assert_array_equal(bits(joined), bits(np.stack([xb, yb], -1)))
    np.testing.assert_array_equal(bits(inter), bits(np.stack([xb, yb], -1).reshape(bm, -1)))
    np.testing.assert_array_equal(bits(cat), bits(np.concatenate([xb, yb], 0)))
    np.testing.assert_array_equal(bits(a), bits(yb))
    np.testing.assert_array_equal(bits(b), bits(xb))


@pytest.mark.parametrize("dtype", [np.float32, np.int16, np.uint8])
def test_join_and_split_of_scalars(rng, dtype):
    x = random_array(rng, (2,), dtype)
    out, first, second = np.zeros(2, dtype), np.zeros(1, dtype), np.zeros(1, dtype)
    launch(K.scalar_join_kernel, (1,), x, out, first, second)
    np.testing.assert_array_equal(bits(out), bits(x[::-1]))
    assert bits(first)[0] == bits(x[1:])[0] and bits(second)[0] == bits(x[:1])[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.uint8])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("m, n, bm, bn, bi", [(6, 13, 8, 16, 4), (3, 2, 4, 2, 8),
                                              (32, 32, 32, 32, 32)])
def test_gather(rng, dtype, axis, m, n, bm, bn, bi):
    src = random_array(rng, (m, n), dtype)
    block = ragged_block(src, bm, bn)
    size = (bm, bn)[axis]
    shape = (bm, bi) if axis == 1 else (bi, bn)
    index = rng.integers(0, size, shape).astype(np.int32)
    out_of_range = rng.random(shape) < 0.1  # past either end: Tessera gives 0
    index[out_of_range] = rng.choice([-1, size, size + 5, -(2**31)], out_of_range.sum())
    out = np.full(shape, 7, dtype)
    launch(K.gather_kernel, (1,), src, index, out, m, n, BM=bm, BN=bn, BI=bi, AXIS=axis)
    ref = np.take_along_axis(block, np.clip(index, 0, size - 1), axis)
    ref[out_of_range] = 0
    np.testing.assert_array_equal(bits(out), bits(ref))


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint16, np.int64])
@pytest.mark.parametrize("block, bins", [(64, 8), (128, 128), (16, 64), (256, 2)])
def test_histogram(rng, dtype, block, bins):
    info = np.iinfo(dtype)
    x = rng.integers(max(info.min, -3), min(info.max, bins + 3), block, endpoint=True)
    x = x.astype(dtype)
    n = int(rng.integers(0, block + 1))
    out, masked = np.zeros(bins, np.int32), np.zeros(bins, np.int32)
    launch(K.histogram_kernel, (1,), x, out, masked, n, BLOCK=block, BINS=bins)
    wide = x.astype(np.int64)
    in_range = (wide >= 0) & (wide < bins)  # values outside [0, bins) are not counted
    np.testing.assert_array_equal(out, np.bincount(wide[in_range], minlength=bins))
    first = wide[:n][in_range[:n]]
    np.testing.assert_array_equal(masked, np.bincount(first, minlength=bins))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bm, bn", [(4, 8), (1, 64), (16, 1), (2, 2)])
def test_flip(rng, dtype, bm, bn):
    x = random_array(rng, (bm, bn), dtype)
    out0, out1 = np.zeros_like(x), np.zeros_like(x)
    launch(K.flip_kernel, (1,), x, out0, out1, BM=bm, BN=bn)
    np.testing.assert_array_equal(bits(out0), bits(x[::-1]))
    np.testing.assert_array_equal(bits(out1), bits(x[:, ::-1]))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.int32,
                                   np.uint8, np.int64])
@pytest.mark.parametrize("m, n, bm, bn", [(3, 5, 4, 8), (8, 64, 8, 64), (1, 1, 1, 2),
                                          (2, 100, 2, 128)])
def test_sort(rng, dtype, m, n, bm, bn):
    x = sortable(rng, (m, n), dtype)
    # Padding sorts last ascending: the dtype's largest value (+inf for floats).
    other = float("inf") if not np.issubdtype(dtype, np.integer) else int(np.iinfo(dtype).max)
    asc, desc = np.zeros((bm, bn), dtype), np.zeros((bm, bn), dtype)
    launch(K.sort_kernel, (1,), x, asc, desc, m, n, BM=bm, BN=bn, OTHER=other)
    block = ragged_block(x, bm, bn, other)
    np.testing.assert_array_equal(bits(asc), bits(np.sort(block, axis=1)))
    np.testing.assert_array_equal(bits(desc), bits(np.sort(block, axis=1)[:, ::-1]))


@pytest.mark.parametrize("dtype, out_dtype", [(np.float32, np.float32), (np.int32, np.int32),
                                              (np.float16, np.float32), (np.int8, np.int32)])
@pytest.mark.parametrize("k", [1, 2, 4, 16])
def test_topk(rng, dtype, out_dtype, k):
    m, n, bm, bn = 5, 13, 8, 16
    x = sortable(rng, (m, n), dtype)
    other = -float("inf") if not np.issubdtype(dtype, np.integer) else int(np.iinfo(dtype).min)
    # As Triton's, narrow types come back widened (topk runs tl.max) unless k is the whole row.
    result_dtype = dtype if k == bn else out_dtype
    out = np.zeros((bm, k), result_dtype)
    launch(K.topk_kernel, (1,), x, out, m, n, BM=bm, BN=bn, K=k, OTHER=other)
    block = ragged_block(x, bm, bn, other).astype(result_dtype)
    np.testing.assert_array_equal(out, np.sort(block, axis=1)[:, ::-1][:, :k])


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("bm, bn", [(4, 16), (1, 128), (8, 2)])
def test_bitonic_merge(rng, descending, bm, bn):
    # Each row rises then falls: a bitonic sequence, which one merge sorts.
    halves = np.sort(sortable(rng, (bm, bn), np.float32), axis=1)
    x = np.concatenate([halves[:, : bn // 2], halves[:, bn // 2:][:, ::-1]], axis=1)
    out = np.zeros_like(x)
    launch(K.bitonic_kernel, (1,), x, out, BM=bm, BN=bn, DESCENDING=descending)
    ref = np.sort(x, axis=1)
    np.testing.assert_array_equal(out, ref[:, ::-1] if descending else ref)
