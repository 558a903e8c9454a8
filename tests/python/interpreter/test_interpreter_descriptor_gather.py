# desc.gather / desc.scatter (Triton's TMA gather and scatter) run by the interpreter against
# NumPy: rows picked by an index tile (out-of-range rows, negative ones included, read as the
# padding and are never written), columns from a run-time offset past the tensor's edge.
import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera import CompilationError


@tessera.jit(interpret=True)
def gather_kernel(out_ptr, in_ptr, idx_ptr, y, X, Y, BX: tl.constexpr, BY: tl.constexpr):
    idx = tl.load(idx_ptr + tl.arange(0, BX))
    desc = tl.make_tensor_descriptor(in_ptr, [X, Y], [Y, 1], [1, BY])
    out = desc.gather(idx, y)
    tl.store(out_ptr + tl.arange(0, BX)[:, None] * BY + tl.arange(0, BY)[None, :], out)


@tessera.jit(interpret=True)
def scatter_kernel(out_ptr, in_ptr, idx_ptr, y, X, Y, BX: tl.constexpr, BY: tl.constexpr):
    idx = tl.load(idx_ptr + tl.arange(0, BX))
    data = tl.load(in_ptr + tl.arange(0, BX)[:, None] * BY + tl.arange(0, BY)[None, :])
    desc = tl.make_tensor_descriptor(out_ptr, [X, Y], [Y, 1], [1, BY])
    desc.scatter(data, idx, y)


@tessera.jit(interpret=True)
def bad_block_kernel(in_ptr, idx_ptr, ROWS: tl.constexpr, BY: tl.constexpr):
    idx = tl.load(idx_ptr + tl.arange(0, 8))
    desc = tl.make_tensor_descriptor(in_ptr, [64, 64], [64, 1], [ROWS, BY])
    desc.gather(idx, 0)


def reference_gather(inp, idx, y, by):
    out = np.zeros((len(idx), by), inp.dtype)
    for i, row in enumerate(idx):
        for j in range(by):
            if 0 <= row < inp.shape[0] and 0 <= y + j < inp.shape[1]:
                out[i, j] = inp[row, y + j]
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8])
@pytest.mark.parametrize("X,Y,BX,BY,y", [(37, 50, 16, 32, 30), (128, 128, 32, 32, 48),
                                         (9, 70, 8, 64, 0)])
def test_gather_matches_numpy(rng, dtype, X, Y, BX, BY, y):
    if np.dtype(dtype).itemsize * BY < 32:
        pytest.skip("rows of a gather are at least 32 bytes (as Triton's)")
    inp = (rng.standard_normal((X, Y)) * 50).astype(dtype)
    idx = rng.integers(-3, X + 3, BX).astype(np.int32)  # some rows outside the tensor
    out = np.full((BX, BY), 7, dtype)
    gather_kernel[(1,)](out, inp, idx, y, X, Y, BX, BY)
    np.testing.assert_array_equal(out, reference_gather(inp, idx, y, BY))


@pytest.mark.parametrize("X,Y,BX,BY,y", [(64, 100, 32, 32, 80), (40, 64, 16, 64, 0)])
def test_scatter_matches_numpy(rng, X, Y, BX, BY, y):
    data = rng.standard_normal((BX, BY)).astype(np.float32)
    idx = rng.permutation(X + 4)[:BX].astype(np.int32)  # distinct rows, some past the end
    out = np.zeros((X, Y), np.float32)
    scatter_kernel[(1,)](out, data, idx, y, X, Y, BX, BY)
    ref = np.zeros((X, Y), np.float32)
    for i, row in enumerate(idx):
        for j in range(BY):
            if row < X and y + j < Y:
                ref[row, y + j] = data[i, j]
    np.testing.assert_array_equal(out, ref)


def test_gather_needs_a_one_row_block(rng):
    inp = np.zeros((64, 64), np.float32)
    idx = np.arange(8, dtype=np.int32)
    with pytest.raises(CompilationError, match="descriptor block must have 1 row"):
        bad_block_kernel[(1,)](inp, idx, 2, 32)
    with pytest.raises(CompilationError, match="at least 8 columns"):
        bad_block_kernel[(1,)](inp, idx, 1, 4)


@tessera.jit(interpret=True)
def narrow_block_kernel(ptr):
    desc = tl.make_tensor_descriptor(ptr, [128, 128], [128, 1], [1, 2])
    desc.load([0, 0])


def test_narrow_block_error_uses_tritons_words():
    with pytest.raises(CompilationError, match="Descriptor block shape must have at least 16 "
                                               "bytes in the last dimension"):
        narrow_block_kernel[(1,)](np.zeros((128, 128), np.int32))
