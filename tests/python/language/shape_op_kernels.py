"""Kernels using the shape builtins (join, split, interleave, cat, gather, histogram, flip,
sort, topk, ...), shared by the interpreter tests and the codegen tests beside them.

Each kernel reads a ragged M x N block (masked: M, N need not be multiples of the block) from
row-major memory and writes its result densely, so a test compares it with NumPy directly.
"""
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
