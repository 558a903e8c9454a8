"""RMSNorm forward and backward in the style of the open-source LLM kernel libraries: a
``calculate_settings`` helper (next_power_of_2 of the row, warps from the block size), the
inverse RMS cached for the backward, ``do_not_specialize`` on the row count, and
``tl.math.rsqrt``."""
import torch

import tessera as triton
import tessera.language as tl

from .common import assert_close, generator

MAX_FUSED_SIZE = 65536


def calculate_settings(n):
    BLOCK_SIZE = triton.next_power_of_2(n)
    if BLOCK_SIZE > MAX_FUSED_SIZE:
        raise RuntimeError(f"Cannot launch Triton kernel since n = {n} exceeds "
                           f"the maximum CUDA blocksize = {MAX_FUSED_SIZE}.")
    num_warps = 4
    if BLOCK_SIZE >= 32768:
        num_warps = 32
    elif BLOCK_SIZE >= 8192:
        num_warps = 16
    elif BLOCK_SIZE >= 2048:
        num_warps = 8
    return BLOCK_SIZE, num_warps


@triton.jit(do_not_specialize=["n_rows"])
def _rms_norm_forward(Y, Y_row_stride, X, X_row_stride, W, RSTD, n_rows, n_cols, eps,
                      BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    Y += row_idx * Y_row_stride
    X += row_idx * X_row_stride
    X_row = tl.load(X + col_offsets, mask=mask, other=0).to(tl.float32)
    W_row = tl.load(W + col_offsets, mask=mask, other=0)
    mean_square = tl.sum(X_row * X_row, axis=0) / n_cols
    rstd = tl.math.rsqrt(mean_square + eps)
    tl.store(RSTD + row_idx, rstd)
    Y_row = (X_row * rstd).to(W_row.dtype) * W_row
    tl.store(Y + col_offsets, Y_row, mask=mask)


@triton.jit
def _rms_norm_backward(dY, dY_row_stride, dX, X, X_row_stride, W, RSTD, dW_partial, n_cols,
                       BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    dY_row = tl.load(dY + row_idx * dY_row_stride + col_offsets, mask=mask, other=0).to(tl.float32)
    X_row = tl.load(X + row_idx * X_row_stride + col_offsets, mask=mask, other=0).to(tl.float32)
    W_row = tl.load(W + col_offsets, mask=mask, other=0).to(tl.float32)
    rstd = tl.load(RSTD + row_idx)
    normed = X_row * rstd
    dY_W = dY_row * W_row
    dot = tl.sum(dY_W * normed, axis=0)
    dX_row = rstd * (dY_W - normed * (dot / n_cols))
    tl.store(dX + row_idx * X_row_stride + col_offsets, dX_row, mask=mask)
    tl.store(dW_partial + row_idx * n_cols + col_offsets, dY_row * normed, mask=mask)


def rms_norm_forward(X, W, eps):
    shape = X.shape
    X = X.view(-1, shape[-1])
    n_rows, n_cols = X.shape
    BLOCK_SIZE, num_warps = calculate_settings(n_cols)
    Y = torch.empty((n_rows, n_cols), dtype=X.dtype, device=X.device)
    rstd = torch.empty(n_rows, dtype=torch.float32, device=X.device)
    _rms_norm_forward[(n_rows, )](Y, Y.stride(0), X, X.stride(0), W, rstd, n_rows, n_cols, eps,
                                  BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
    return Y.view(*shape), rstd


def rms_norm_backward(dY, X, W, rstd):
    shape = X.shape
    dY = dY.view(-1, shape[-1])
    X = X.view(-1, shape[-1])
    n_rows, n_cols = X.shape
    BLOCK_SIZE, num_warps = calculate_settings(n_cols)
    dX = torch.empty_like(X)
    dW_partial = torch.empty((n_rows, n_cols), dtype=torch.float32, device=X.device)
    _rms_norm_backward[(n_rows, )](dY, dY.stride(0), dX, X, X.stride(0), W, rstd, dW_partial,
                                   n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
    return dX.view(*shape), dW_partial.sum(0).to(W.dtype)


def check(device):
    g = generator(device, 5)
    for shape in ((1, 5), (3, 7, 77), (2, 19, 520) if device == "cpu" else (8, 333, 4096)):
        X = torch.randn(*shape, device=device, generator=g)
        W = torch.rand(shape[-1], device=device, generator=g)
        dY = torch.randn(*shape, device=device, generator=g)
        Y, rstd = rms_norm_forward(X, W, 1e-6)
        Xd, Wd = X.double().requires_grad_(), W.double().requires_grad_()
        ref = Xd * torch.rsqrt(Xd.pow(2).mean(-1, keepdim=True) + 1e-6) * Wd
        assert_close(Y, ref, torch.float32, f"rms_norm forward {shape}", factor=10)
        ref.backward(dY.double())
        dX, dW = rms_norm_backward(dY, X, W, rstd)
        assert_close(dX, Xd.grad, torch.float32, f"rms_norm dX {shape}", factor=10)
        assert_close(dW, Wd.grad, torch.float32, f"rms_norm dW {shape}", factor=10)


def bench(device):
    X = torch.randn(4096, 4096, device=device)
    W = torch.rand(4096, device=device)
    return rms_norm_forward, (X, W, 1e-6)
