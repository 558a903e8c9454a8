"""join, split, interleave, cat, gather, histogram, flip, sort, topk and bitonic_merge on the
GPU against NumPy, on fresh random inputs and ragged blocks, for 1, 4 and 8 warps (the kernels
of tests/python/language/shape_op_kernels.py, which the interpreter and codegen tests use).
Moves are compared bit for bit (-0.0, NaN and inf included); outputs are poisoned first.
"""
import os
import secrets
import sys

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python", "language"))
import shape_op_kernels as K  # noqa: E402
from shape_op_kernels import bits, ragged_block, random_array, sortable  # noqa: E402

TORCH = {np.dtype(np.float32): torch.float32, np.dtype(np.float16): torch.float16,
         np.dtype(ml_dtypes.bfloat16): torch.bfloat16, np.dtype(np.int8): torch.int8,
         np.dtype(np.uint8): torch.uint8, np.dtype(np.int32): torch.int32,
         np.dtype(np.int64): torch.int64}
WARPS = [1, 4, 8]


def keep_small(num_warps, elements, dtype, main_dtype=np.float32):
    """Bounds the compile time of the matrix: every dtype at 4 warps, 1 and 8 warps for the
    main dtype only, and no case holding over 32 elements per thread (one warp sorting 4096
    values spills; Triton's would too)."""
    if num_warps != 4 and dtype != main_dtype:
        pytest.skip("other warp counts are covered with the main dtype")
    if elements > 32 * 32 * num_warps:
        pytest.skip("too many elements per thread for this warp count")


@pytest.fixture
def rng():
    seed = int(os.environ.get("GPU_TEST_SEED") or secrets.randbits(32))
    print(f"numpy seed: {seed}")
    return np.random.default_rng(seed)


def to_gpu(a):
    a = np.ascontiguousarray(a)
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16).cuda()
    return torch.from_numpy(a).cuda()


def poisoned(shape, dtype):
    out = torch.empty(shape, dtype=TORCH[np.dtype(dtype)], device="cuda")
    return out.fill_(90) if not out.is_floating_point() else out.fill_(float("nan"))


def to_numpy(t, dtype):
    t = t.cpu()
    if dtype == ml_dtypes.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


@pytest.mark.parametrize("num_warps", WARPS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.int8,
                                   np.int64])
@pytest.mark.parametrize("m, n, bm, bn", [(5, 7, 8, 8), (13, 29, 16, 32), (1, 30, 2, 32)])
def test_join_split_interleave_cat(rng, num_warps, dtype, m, n, bm, bn):
    keep_small(num_warps, 2 * bm * bn, dtype)
    x, y = random_array(rng, (m, n), dtype), random_array(rng, (m, n), dtype)
    outs = [poisoned(s, dtype) for s in ((bm, bn, 2), (bm, 2 * bn), (2 * bm, bn), (bm, bn),
                                         (bm, bn))]
    K.join_split_kernel[(1,)](to_gpu(x), to_gpu(y), *outs, m, n, BM=bm, BN=bn,
                              num_warps=num_warps)
    joined, inter, cat, a, b = (to_numpy(o, dtype) for o in outs)
    xb, yb = ragged_block(x, bm, bn), ragged_block(y, bm, bn)
    np.testing.assert_array_equal(bits(joined), bits(np.stack([xb, yb], -1)))
    np.testing.assert_array_equal(bits(inter), bits(np.stack([xb, yb], -1).reshape(bm, -1)))
    np.testing.assert_array_equal(bits(cat), bits(np.concatenate([xb, yb], 0)))
    np.testing.assert_array_equal(bits(a), bits(yb))
    np.testing.assert_array_equal(bits(b), bits(xb))


def test_join_and_split_of_scalars(rng):
    x = random_array(rng, (2,), np.float32)
    out, first, second = poisoned(2, np.float32), poisoned(1, np.float32), poisoned(1, np.float32)
    K.scalar_join_kernel[(1,)](to_gpu(x), out, first, second)
    np.testing.assert_array_equal(bits(to_numpy(out, np.float32)), bits(x[::-1]))
    assert bits(to_numpy(first, np.float32))[0] == bits(x[1:])[0]
    assert bits(to_numpy(second, np.float32))[0] == bits(x[:1])[0]


@pytest.mark.parametrize("num_warps", WARPS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("m, n, bm, bn, bi", [(6, 13, 8, 16, 4), (30, 32, 32, 32, 32)])
def test_gather(rng, num_warps, dtype, axis, m, n, bm, bn, bi):
    size, shape = (bm, bn)[axis], ((bi, bn) if axis == 0 else (bm, bi))
    keep_small(num_warps, size * shape[0] * shape[1], dtype)
    src = random_array(rng, (m, n), dtype)
    index = rng.integers(-2, size + 2, shape).astype(np.int32)  # some out of range: 0
    out = poisoned(shape, dtype)
    K.gather_kernel[(1,)](to_gpu(src), to_gpu(index), out, m, n, BM=bm, BN=bn, BI=bi,
                          AXIS=axis, num_warps=num_warps)
    ref = np.take_along_axis(ragged_block(src, bm, bn), np.clip(index, 0, size - 1), axis)
    ref[(index < 0) | (index >= size)] = 0
    np.testing.assert_array_equal(bits(to_numpy(out, dtype)), bits(ref))


@pytest.mark.parametrize("num_warps", WARPS)
@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.int64])
@pytest.mark.parametrize("block, bins", [(64, 8), (1024, 128), (16, 64), (256, 2)])
def test_histogram(rng, num_warps, dtype, block, bins):
    keep_small(num_warps, block, dtype, np.int32)
    info = np.iinfo(dtype)
    x = rng.integers(max(info.min, -3), min(info.max, bins + 3), block, endpoint=True)
    x = x.astype(dtype)
    n = int(rng.integers(0, block + 1))
    out, masked = poisoned(bins, np.int32), poisoned(bins, np.int32)
    K.histogram_kernel[(1,)](to_gpu(x), out, masked, n, BLOCK=block, BINS=bins,
                             num_warps=num_warps)
    wide = x.astype(np.int64)
    inside = (wide >= 0) & (wide < bins)
    np.testing.assert_array_equal(out.cpu().numpy(), np.bincount(wide[inside], minlength=bins))
    head = wide[:n][inside[:n]]
    np.testing.assert_array_equal(masked.cpu().numpy(), np.bincount(head, minlength=bins))


@pytest.mark.parametrize("num_warps", WARPS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.uint8,
                                   np.int64])
@pytest.mark.parametrize("bm, bn", [(4, 8), (1, 256), (64, 1), (16, 64)])
def test_flip(rng, num_warps, dtype, bm, bn):
    keep_small(num_warps, bm * bn, dtype)
    x = random_array(rng, (bm, bn), dtype)
    out0, out1 = poisoned((bm, bn), dtype), poisoned((bm, bn), dtype)
    K.flip_kernel[(1,)](to_gpu(x), out0, out1, BM=bm, BN=bn, num_warps=num_warps)
    np.testing.assert_array_equal(bits(to_numpy(out0, dtype)), bits(x[::-1]))
    np.testing.assert_array_equal(bits(to_numpy(out1, dtype)), bits(x[:, ::-1]))


@pytest.mark.parametrize("num_warps", WARPS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.int32,
                                   np.uint8, np.int64])
@pytest.mark.parametrize("m, n, bm, bn", [(3, 5, 4, 8), (8, 64, 8, 64), (2, 1000, 2, 1024),
                                          (30, 100, 32, 128)])
def test_sort(rng, num_warps, dtype, m, n, bm, bn):
    keep_small(num_warps, bm * bn, dtype)
    x = sortable(rng, (m, n), dtype)
    other = float("inf") if not np.issubdtype(dtype, np.integer) else int(np.iinfo(dtype).max)
    asc, desc = poisoned((bm, bn), dtype), poisoned((bm, bn), dtype)
    K.sort_kernel[(1,)](to_gpu(x), asc, desc, m, n, BM=bm, BN=bn, OTHER=other,
                        num_warps=num_warps)
    ref = np.sort(ragged_block(x, bm, bn, other), axis=1)
    np.testing.assert_array_equal(bits(to_numpy(asc, dtype)), bits(ref))
    np.testing.assert_array_equal(bits(to_numpy(desc, dtype)), bits(ref[:, ::-1]))


@pytest.mark.parametrize("num_warps", WARPS)
@pytest.mark.parametrize("dtype, out_dtype", [(np.float32, np.float32), (np.int32, np.int32),
                                              (np.float16, np.float32), (np.int8, np.int32)])
@pytest.mark.parametrize("k", [1, 4, 16, 128])
def test_topk(rng, num_warps, dtype, out_dtype, k):
    m, n, bm, bn = 5, 120, 8, 128
    keep_small(num_warps, bm * bn, dtype)
    x = sortable(rng, (m, n), dtype)
    other = -float("inf") if not np.issubdtype(dtype, np.integer) else int(np.iinfo(dtype).min)
    result_dtype = dtype if k == bn else out_dtype  # narrow types widen through tl.max
    out = poisoned((bm, k), result_dtype)
    K.topk_kernel[(1,)](to_gpu(x), out, m, n, BM=bm, BN=bn, K=k, OTHER=other,
                        num_warps=num_warps)
    block = ragged_block(x, bm, bn, other).astype(result_dtype)
    np.testing.assert_array_equal(to_numpy(out, result_dtype),
                                  np.sort(block, axis=1)[:, ::-1][:, :k])


@pytest.mark.parametrize("num_warps", WARPS)
@pytest.mark.parametrize("descending", [False, True])
def test_bitonic_merge(rng, num_warps, descending):
    halves = np.sort(sortable(rng, (4, 64), np.float32), axis=1)
    x = np.concatenate([halves[:, :32], halves[:, 32:][:, ::-1]], axis=1)
    out = poisoned((4, 64), np.float32)
    K.bitonic_kernel[(1,)](to_gpu(x), out, BM=4, BN=64, DESCENDING=descending,
                           num_warps=num_warps)
    ref = np.sort(x, axis=1)
    np.testing.assert_array_equal(out.cpu().numpy(), ref[:, ::-1] if descending else ref)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_downcast_toward_zero(rng, dtype):
    """x.to(dtype, fp_downcast_rounding="rtz") against the definition (see the interpreter's
    test in tests/python/language/test_tensor_surface.py)."""
    from test_tensor_surface import float_specials, round_kernel, toward_zero_reference
    n = 1000
    x = float_specials(rng, n)
    rtz, rtne = poisoned(n, dtype), poisoned(n, dtype)
    round_kernel[(1,)](to_gpu(x), rtz, rtne, n, BLOCK=1024)
    rtz, ref = to_numpy(rtz, dtype), toward_zero_reference(x, dtype)
    finite = ~np.isnan(x)
    np.testing.assert_array_equal(rtz.view(np.uint16)[finite], ref.view(np.uint16)[finite])
    assert np.isnan(rtz.astype(np.float32)[~finite]).all()
    with np.errstate(over="ignore"):
        nearest = x.astype(dtype).astype(np.float32)
    np.testing.assert_array_equal(to_numpy(rtne, dtype).astype(np.float32), nearest)
