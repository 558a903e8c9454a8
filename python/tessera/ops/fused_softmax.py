"""Fused softmax along the rows of a matrix: each row read once and written once.

A program takes BLOCK_ROWS rows of BLOCK_COLS columns (the row length rounded up to a power
of two). Lanes past the row's end load -inf: exp(-inf - max) = 0, so they add nothing to the
sum and never win the max. The tile is chosen from the row length (`softmax_config`), not
timed: at least 2048 elements per program (short rows share one), one warp per 512 elements
for long rows. tutorials/02-fused-softmax.py derives it step by step.
"""
import numpy as np

import tessera
import tessera.language as tl


@tessera.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_rows, n_cols,
                   BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    cols = tl.arange(0, BLOCK_COLS)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    rows = rows.to(tl.int64)  # rows · stride may pass 2^31
    x = tl.load(in_ptr + rows[:, None] * in_row_stride + cols[None, :], mask=mask,
                other=-float("inf")).to(tl.float32)
    shifted = x - tl.max(x, axis=1)[:, None]
    numerator = tl.exp(shifted)
    inverse = 1.0 / tl.sum(numerator, axis=1)
    tl.store(out_ptr + rows[:, None] * out_row_stride + cols[None, :],
             numerator * inverse[:, None], mask=mask)



def softmax_config(n_cols: int) -> dict:
    """The tile and warps for rows of n_cols: 2048 elements at least, 512 per warp."""
    block_cols = 1 << max(0, (n_cols - 1).bit_length())
    block_rows = max(1, 2048 // block_cols)
    return {"BLOCK_ROWS": block_rows, "BLOCK_COLS": block_cols,
            "num_warps": min(32, max(4, block_rows * block_cols // 512))}


def softmax(x, out=None):
    """Row-wise softmax: ``out[i, j] = exp(x[i, j] - m_i) / Σ_j exp(x[i, j] - m_i)``, with
    ``m_i = max_j x[i, j]``.

    Args:
        x: (rows, cols) float32, float16 or bfloat16; rows may be strided, columns must be
            contiguous. A CUDA torch tensor runs on the GPU; a NumPy array (or a CPU tensor
            with ``TESSERA_INTERPRET=1``) through the interpreter. Computed in float32.
        out: written when given: like x (rows may be strided).

    Returns:
        ``out``: (rows, cols) in x's dtype.

    Example::

        import torch
        from tessera.ops import softmax
        x = torch.randn(4096, 1000, device="cuda")
        y = softmax(x)  # torch.softmax(x, dim=1) within 1e-5
    """
    n_rows, n_cols = x.shape
    if out is None:
        out = np.empty_like(x) if isinstance(x, np.ndarray) else x.new_empty(x.shape)
    stride = (lambda a: a.strides[0] // a.itemsize) if isinstance(x, np.ndarray) else (
        lambda a: a.stride(0))
    config = softmax_config(n_cols)
    grid = (tessera.cdiv(n_rows, config["BLOCK_ROWS"]),)
    softmax_kernel[grid](out, x, stride(x), stride(out), n_rows, n_cols, **config)
    return out
