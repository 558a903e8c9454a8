# Block pointers (tl.make_block_ptr, tl.advance, loads and stores with boundary_check and
# padding_option) run by the interpreter against NumPy, on fresh random inputs and shapes that
# are not multiples of the blocks; Triton's semantics: checked dims are never accessed outside
# the tensor, unchecked ones are.
import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera import CompilationError
from tessera.interpreter import KernelRuntimeError


@tessera.jit(interpret=True)
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                  A_ORDER: tl.constexpr, B_ORDER: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_block = tl.make_block_ptr(a_ptr, shape=(M, K), strides=(sam, sak), offsets=(pid_m * BM, 0),
                                block_shape=(BM, BK), order=A_ORDER)
    b_block = tl.make_block_ptr(b_ptr, (K, N), (sbk, sbn), (0, pid_n * BN), (BK, BN), B_ORDER)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(0, K, BK):
        a = tl.load(a_block, boundary_check=(0, 1), padding_option="zero")
        b = tl.load(b_block, boundary_check=(0, 1), padding_option="zero")
        acc += tl.dot(a, b, input_precision="ieee")
        a_block = tl.advance(a_block, (0, BK))
        b_block = b_block.advance((BK, 0))
    c_block = tl.make_block_ptr(c_ptr, (M, N), (scm, scn), (pid_m * BM, pid_n * BN), (BM, BN),
                                (1, 0))
    tl.store(c_block, acc, boundary_check=(0, 1))


@pytest.mark.parametrize("M,N,K", [(32, 32, 32), (37, 45, 53), (5, 70, 19)])
@pytest.mark.parametrize("transposed", [False, True])
def test_matmul_ragged_and_transposed(rng, M, N, K, transposed):
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    if transposed:  # A and B stored column-major: block pointers with order (0, 1)
        a_mem, b_mem = np.ascontiguousarray(a.T), np.ascontiguousarray(b.T)
        strides = (1, M, 1, K)
        orders = dict(A_ORDER=(0, 1), B_ORDER=(0, 1))
    else:
        a_mem, b_mem = a, b
        strides = (K, 1, N, 1)
        orders = dict(A_ORDER=(1, 0), B_ORDER=(1, 0))
    c = np.full((M, N), np.nan, np.float32)
    grid = (tessera.cdiv(M, 16), tessera.cdiv(N, 32))
    matmul_kernel[grid](a_mem, b_mem, c, M, N, K, *strides, N, 1, BM=16, BN=32, BK=16, **orders)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)


@tessera.jit(interpret=True)
def copy_kernel(x_ptr, y_ptr, M, N, sxm, sym, off_m, off_n, BM: tl.constexpr,
                BN: tl.constexpr, CHECK: tl.constexpr, PAD: tl.constexpr):
    """Copies the block at (off_m, off_n) of x to the block at (0, 0) of y (no bounds check)."""
    x_block = tl.make_block_ptr(x_ptr, (M, N), (sxm, 1), (off_m, off_n), (BM, BN), (1, 0))
    y_block = tl.make_block_ptr(y_ptr, (BM, BN), (sym, 1), (0, 0), (BM, BN), (1, 0))
    tl.store(y_block, tl.load(x_block, boundary_check=CHECK, padding_option=PAD))


def _window(x, off_m, off_n, bm, bn, fill):
    """The (bm, bn) block of x at (off_m, off_n), `fill` outside x."""
    out = np.full((bm, bn), fill, x.dtype)
    rows = np.arange(off_m, off_m + bm)
    cols = np.arange(off_n, off_n + bn)
    inside_r = (rows >= 0) & (rows < x.shape[0])
    inside_c = (cols >= 0) & (cols < x.shape[1])
    out[np.ix_(inside_r, inside_c)] = x[np.ix_(rows[inside_r], cols[inside_c])]
    return out


@pytest.mark.parametrize("pad,fill", [("zero", 0.0), ("nan", np.nan)])
@pytest.mark.parametrize("off_m,off_n", [(-3, -5), (13, 21), (0, 0), (-16, 40)])
def test_load_padding_both_dims(rng, pad, fill, off_m, off_n):
    x = rng.standard_normal((19, 45)).astype(np.float32)
    y = np.full((16, 32), -1.0, np.float32)
    copy_kernel[(1,)](x, y, 19, 45, 45, 32, off_m, off_n, BM=16, BN=32, CHECK=(0, 1), PAD=pad)
    np.testing.assert_array_equal(y, _window(x, off_m, off_n, 16, 32, fill))


def test_boundary_check_on_one_dim(rng):
    # Rows are checked (padded with NaN), columns are not: a column block past N but inside
    # the buffer reads the next row's elements, as addresses dictate (Triton does the same).
    full = rng.standard_normal((24, 64)).astype(np.float32)  # a (24, 40) tensor, row stride 64
    y = np.empty((16, 32), np.float32)
    copy_kernel[(1,)](full, y, 24, 40, 64, 32, 12, 16, BM=16, BN=32, CHECK=(0,), PAD="nan")
    expected = np.full((16, 32), np.nan, np.float32)
    expected[:12] = full[12:24, 16:48]  # columns 40..47 are read past N (inside the row)
    np.testing.assert_array_equal(y, expected)


def test_unchecked_dim_is_accessed():
    # Without a check, rows past the tensor are read: outside the buffer that is a fault.
    x = np.zeros((8, 32), np.float32)
    y = np.empty((16, 32), np.float32)
    with pytest.raises(KernelRuntimeError):
        copy_kernel[(1,)](x, y, 8, 32, 32, 32, 0, 0, BM=16, BN=32, CHECK=(1,), PAD="zero")
    copy_kernel[(1,)](x, y, 8, 32, 32, 32, 0, 0, BM=16, BN=32, CHECK=0, PAD="zero")  # an int


def test_no_padding_option_keeps_inside_values(rng):
    # padding_option="" leaves the checked-out elements undefined: only the inside is pinned.
    x = rng.standard_normal((10, 20)).astype(np.float32)
    y = np.empty((16, 32), np.float32)
    copy_kernel[(1,)](x, y, 10, 20, 20, 32, 2, 3, BM=16, BN=32, CHECK=(0, 1), PAD="")
    np.testing.assert_array_equal(y[:8, :17], x[2:, 3:])


@tessera.jit(interpret=True)
def store_kernel(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr, CHECK: tl.constexpr):
    """Scales x by 2 block by block; the stores are bounds-checked along CHECK only."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    x_block = tl.make_block_ptr(x_ptr, (M, N), (N, 1), (pid_m * BM, pid_n * BN), (BM, BN), (1, 0))
    y_block = tl.make_block_ptr(y_ptr, (M, N), (N, 1), (pid_m * BM, pid_n * BN), (BM, BN), (1, 0))
    x = tl.load(x_block, boundary_check=(0, 1))
    tl.store(y_block, x * 2.0, boundary_check=CHECK)


def test_store_boundary_check(rng):
    M, N = 21, 40
    x = rng.standard_normal((M, N)).astype(np.float32)
    y = np.full((M, N), -3.0, np.float32)
    store_kernel[(2, 2)](x, y, M, N, BM=16, BN=32, CHECK=(0, 1))
    np.testing.assert_array_equal(y, 2 * x)


def test_store_checked_rows_unchecked_columns_wraps(rng):
    # N is a multiple of the block along columns, so only rows need the check; a block of
    # rows past M is never written (the buffer is exactly M x N, so a write there would fault).
    M, N = 21, 64
    x = rng.standard_normal((M, N)).astype(np.float32)
    y = np.zeros((M, N), np.float32)
    store_kernel[(2, 2)](x, y, M, N, BM=16, BN=32, CHECK=(0,))
    np.testing.assert_array_equal(y, 2 * x)
    with pytest.raises(KernelRuntimeError):
        store_kernel[(2, 2)](x, y, M, N, BM=16, BN=32, CHECK=(1,))


@tessera.jit
def _row_sums(block, n_steps, BN: tl.constexpr):
    total = tl.zeros((16,), dtype=tl.float32)
    i = 0
    while i < n_steps:
        total += tl.sum(tl.load(block, boundary_check=(0, 1), padding_option="zero"), axis=1)
        block = block.advance((0, BN))
        i += 1
    return total, block


@tessera.jit
def _pick(block, flag):
    if flag > 0:
        block = tl.advance(block, (16, 0))
    return block


@tessera.jit(interpret=True)
def helper_kernel(x_ptr, out_ptr, end_ptr, M, N, flag, BN: tl.constexpr):
    block = tl.make_block_ptr(x_ptr, (M, N), (N, 1), (0, 0), (16, BN), (1, 0))
    block = _pick(block, flag)
    sums, block = _row_sums(block, tl.cdiv(N, BN), BN)
    tl.store(out_ptr + tl.arange(0, 16), sums)
    # The returned pointer sits past the last column block: load one more block there.
    past_end = tl.load(block, boundary_check=(0, 1), padding_option="nan")
    tl.store(end_ptr + tl.arange(0, 16), tl.sum(past_end, axis=1))


@pytest.mark.parametrize("flag", [0, 1])
def test_block_pointers_through_helpers_if_and_while(rng, flag):
    M, N = 29, 50
    x = rng.standard_normal((M, N)).astype(np.float32)
    out = np.empty(16, np.float32)
    end = np.empty(16, np.float32)
    helper_kernel[(1,)](x, out, end, M, N, flag, BN=16)
    rows = x[16 * flag:16 * flag + 16].astype(np.float64).sum(axis=1)
    expected = np.zeros(16)
    expected[:len(rows)] = rows
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    assert np.isnan(end).all()  # every element of that block is past N: NaN padding


@tessera.jit(interpret=True)
def nd_kernel(x_ptr, y_ptr, A, B, C, BA: tl.constexpr, BB: tl.constexpr, BC: tl.constexpr):
    """Copies a 3-D tensor in (BA, BB, BC) blocks, and its first row through a 1-D block."""
    pa, pb, pc = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    src = tl.make_block_ptr(x_ptr, (A, B, C), (B * C, C, 1), (pa * BA, pb * BB, pc * BC),
                            (BA, BB, BC), (2, 1, 0))
    dst = tl.make_block_ptr(y_ptr, (A, B, C), (B * C, C, 1), (pa * BA, pb * BB, pc * BC),
                            (BA, BB, BC), (2, 1, 0))
    tl.store(dst, tl.load(src, boundary_check=(0, 1, 2)), boundary_check=(0, 1, 2))


def test_three_dims(rng):
    x = rng.standard_normal((5, 7, 9)).astype(np.float32)
    y = np.zeros_like(x)
    nd_kernel[(3, 2, 2)](x, y, 5, 7, 9, BA=2, BB=4, BC=8)
    np.testing.assert_array_equal(y, x)


@tessera.jit(interpret=True)
def vector_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    src = tl.make_block_ptr(x_ptr, (n,), (1,), (tl.program_id(0) * BLOCK,), (BLOCK,), (0,))
    dst = tl.make_block_ptr(y_ptr, shape=[n], strides=[1], offsets=[tl.program_id(0) * BLOCK],
                            block_shape=[BLOCK], order=[0])
    tl.store(dst, tl.load(src, boundary_check=[0]) + 1, boundary_check=[0])


@pytest.mark.parametrize("dtype", [np.int32, np.int16, np.uint8, np.float64])
def test_one_dim_and_dtypes(rng, dtype):
    x = rng.integers(0, 100, 77).astype(dtype)
    y = np.zeros_like(x)
    vector_kernel[(3,)](x, y, 77, BLOCK=32)
    np.testing.assert_array_equal(y, x + 1)


@tessera.jit(interpret=True)
def bool_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    src = tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (BLOCK,), (0,))
    value = tl.load(src, boundary_check=(0,), padding_option="zero")
    tl.static_assert(value.dtype == tl.int8)  # int1 memory is int8, as in Triton
    tl.store(y_ptr + tl.arange(0, BLOCK), value)


def test_bool_base_reads_int8(rng):
    x = rng.integers(0, 2, 20).astype(bool)
    y = np.full(32, 7, np.int8)
    bool_kernel[(1,)](x, y, 20, BLOCK=32)
    np.testing.assert_array_equal(y, np.concatenate([x.astype(np.int8), np.zeros(12, np.int8)]))


# ---- errors: a CompilationError naming the kernel and the line ---------------------------------


BAD = [
    ("tl.load(p, mask=None, other=1.0)", "mask and other"),
    ("tl.load(p, boundary_check=(2,))", "boundary_check"),
    ("tl.load(p, boundary_check=(0, 0))", "duplicate"),
    ("tl.load(p, padding_option='one')", "padding_option"),
    ("tl.store(p, tl.zeros((16, 16), tl.float16))", "element type"),
    ("tl.store(p, tl.zeros((16, 8), tl.float32))", "shape"),
    ("tl.store(p, tl.zeros((16, 16), tl.float32), mask=n > 0)", "mask"),
    ("tl.advance(p, (1,))", "advance needs 2 offsets"),
    ("tl.advance(p, (n.to(tl.int64), 0))", "32-bit"),
    ("tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (16,), (1,))", "permutation"),
    ("tl.make_block_ptr(x_ptr, (n, n), (1,), (0, 0), (16, 16), (1, 0))", "one length"),
    ("tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (12,), (0,))", "power of 2"),
    ("tl.make_block_ptr(x_ptr + tl.arange(0, 4), (n,), (1,), (0,), (4,), (0,))", "scalar"),
    ("tl.load(x_ptr, boundary_check=(0,))", "only to block pointers"),
    ("tl.advance(x_ptr, (0,))", "block pointer"),
]


@pytest.mark.parametrize("body,match", BAD)
def test_errors(tmp_path, body, match):
    path = tmp_path / "bad_kernel.py"
    path.write_text("import tessera\nimport tessera.language as tl\n\n\n"
                    "@tessera.jit(interpret=True)\n"
                    "def bad(x_ptr, n):\n"
                    "    p = tl.make_block_ptr(x_ptr, (n, n), (n, 1), (0, 0), (16, 16), (1, 0))\n"
                    f"    {body}\n")
    import importlib.util
    spec = importlib.util.spec_from_file_location(f"bad_kernel_{abs(hash(body))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(CompilationError, match=match) as info:
        module.bad[(1,)](np.zeros(256, np.float32), 16)
    assert "bad" in str(info.value) and ":8:" in str(info.value)


def test_nan_padding_of_integers_is_an_error():
    x = np.zeros(64, np.int32)
    with pytest.raises(CompilationError, match="nan"):
        copy_kernel[(1,)](x, x, 8, 8, 8, 8, 0, 0, BM=8, BN=8, CHECK=(0,), PAD="nan")


@tessera.jit(interpret=True)
def loop_type_change_kernel(x_ptr, n):
    p = tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (16,), (0,))
    for _ in range(2):
        p = tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (32,), (0,))  # noqa: F841 (rejected)


def test_loop_carried_block_pointer_keeps_its_type():
    with pytest.raises(CompilationError, match="keeps its type"):
        loop_type_change_kernel[(1,)](np.zeros(64, np.float32), 64)


def test_negative_shape_is_empty(rng):
    # No index is inside a negative extent (Triton's signed bounds check).
    x = rng.standard_normal((16, 32)).astype(np.float32)
    y = np.full((16, 32), -1.0, np.float32)
    copy_kernel[(1,)](x, y, -4, 32, 32, 32, 0, 0, BM=16, BN=32, CHECK=(0,), PAD="zero")
    np.testing.assert_array_equal(y, np.zeros((16, 32), np.float32))
