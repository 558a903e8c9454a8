"""Kernels using the shape builtins (join, split, interleave, cat, gather, histogram, flip,
sort, topk, ...), shared by the interpreter tests and the codegen tests beside them.

Each kernel reads a ragged M x N block (masked: M, N need not be multiples of the block) from
row-major memory and writes its result densely, so a test compares it with NumPy directly.
"""
import numpy as np
import tessera
import tessera.language as tl


@tessera.jit
def load_block(ptr, M, N, BM: tl.constexpr, BN: tl.constexpr, OTHER: tl.constexpr):
    rows = tl.arange(0, BM)[:, None]
    cols = tl.arange(0, BN)[None, :]
    return tl.load(ptr + rows * N + cols, mask=(rows < M) & (cols < N), other=OTHER)


@tessera.jit
def store_block(ptr, value, BM: tl.constexpr, BN: tl.constexpr):
    """Stores a BM x BN tile densely (row stride BN)."""
    rows = tl.arange(0, BM)[:, None]
    cols = tl.arange(0, BN)[None, :]
    tl.store(ptr + rows * BN + cols, value)


@tessera.jit
def join_split_kernel(x_ptr, y_ptr, joined_ptr, inter_ptr, cat_ptr, a_ptr, b_ptr, M, N,
                      BM: tl.constexpr, BN: tl.constexpr):
    x = load_block(x_ptr, M, N, BM, BN, 0)
    y = load_block(y_ptr, M, N, BM, BN, 0)
    joined = tl.join(x, y)  # [BM, BN, 2]
    offs = (tl.arange(0, BM)[:, None, None] * (2 * BN) + tl.arange(0, BN)[None, :, None] * 2
            + tl.arange(0, 2)[None, None, :])
    tl.store(joined_ptr + offs, joined)
    store_block(inter_ptr, tl.interleave(x, y), BM, 2 * BN)
    store_block(cat_ptr, tl.cat(x, y, can_reorder=True), 2 * BM, BN)
    a, b = tl.split(tl.join(y, x))  # split is join's inverse
    store_block(a_ptr, a, BM, BN)
    store_block(b_ptr, b, BM, BN)


@tessera.jit
def scalar_join_kernel(x_ptr, out_ptr, first_ptr, second_ptr):
    x = tl.load(x_ptr)
    y = tl.load(x_ptr + 1)
    pair = tl.join(y, x)  # two scalars: shape [2]
    tl.store(out_ptr + tl.arange(0, 2), pair)
    first, second = pair.split()  # shape [2]: two scalars
    tl.store(first_ptr, first)
    tl.store(second_ptr, second)


@tessera.jit
def gather_kernel(src_ptr, idx_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr,
                  BI: tl.constexpr, AXIS: tl.constexpr):
    src = load_block(src_ptr, M, N, BM, BN, 0)
    if AXIS == 1:
        index = tl.load(idx_ptr + tl.arange(0, BM)[:, None] * BI + tl.arange(0, BI)[None, :])
        store_block(out_ptr, tl.gather(src, index, 1), BM, BI)
    else:
        index = tl.load(idx_ptr + tl.arange(0, BI)[:, None] * BN + tl.arange(0, BN)[None, :])
        store_block(out_ptr, src.gather(index, 0), BI, BN)


@tessera.jit
def histogram_kernel(x_ptr, out_ptr, masked_ptr, n, BLOCK: tl.constexpr, BINS: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + tl.arange(0, BINS), tl.histogram(x, BINS))
    tl.store(masked_ptr + tl.arange(0, BINS), x.histogram(BINS, mask=offs < n))


@tessera.jit
def flip_kernel(x_ptr, out0_ptr, out1_ptr, BM: tl.constexpr, BN: tl.constexpr):
    x = load_block(x_ptr, BM, BN, BM, BN, 0)
    store_block(out0_ptr, tl.flip(x, 0), BM, BN)
    store_block(out1_ptr, x.flip(), BM, BN)  # the last dim by default


@tessera.jit
def sort_kernel(x_ptr, asc_ptr, desc_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr,
                OTHER: tl.constexpr):
    x = load_block(x_ptr, M, N, BM, BN, OTHER)
    store_block(asc_ptr, tl.sort(x), BM, BN)
    store_block(desc_ptr, x.sort(dim=1, descending=True), BM, BN)


@tessera.jit
def topk_kernel(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr, K: tl.constexpr,
                OTHER: tl.constexpr):
    x = load_block(x_ptr, M, N, BM, BN, OTHER)
    store_block(out_ptr, tl.topk(x, K), BM, K)


@tessera.jit
def bitonic_kernel(x_ptr, out_ptr, BM: tl.constexpr, BN: tl.constexpr,
                   DESCENDING: tl.constexpr):
    x = load_block(x_ptr, BM, BN, BM, BN, 0)
    store_block(out_ptr, tl.bitonic_merge(x, descending=DESCENDING), BM, BN)


# ---- inputs and references ------------------------------------------------------------


def random_array(rng, shape, dtype):
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -10**6), min(info.max, 10**6), shape,
                            endpoint=True).astype(dtype)
    values = rng.standard_normal(shape).astype(dtype)
    flat = values.reshape(-1)  # special values, for the exact-move checks
    flat[: min(3, flat.size)] = np.array([-0.0, np.nan, np.inf], dtype)[: min(3, flat.size)]
    return values


def bits(a):
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize])


def ragged_block(x, bm, bn, other=0):
    """x (M x N) in a bm x bn block, `other` outside: what load_block reads."""
    block = np.full((bm, bn), other, x.dtype)
    block[: x.shape[0], : x.shape[1]] = x
    return block


def sortable(rng, shape, dtype):
    """Random values without -0.0 (np.sort puts -0.0 and 0.0 in either order) or NaN."""
    if np.issubdtype(dtype, np.integer):
        return random_array(rng, shape, dtype)
    values = rng.standard_normal(shape).astype(dtype)
    values[values == 0] = 1
    return values
