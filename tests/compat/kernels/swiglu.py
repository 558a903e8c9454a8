"""SwiGLU forward and backward as LLM kernel libraries write them: silu(a) * b with the
sigmoid in fp32, the backward recomputing the sigmoid and writing both gradients in place."""
import torch

import tessera as triton
import tessera.language as tl

from .common import assert_close, generator


@triton.jit
def silu(x):
    return x * tl.sigmoid(x)


@triton.jit
def _swiglu_forward_kernel(a_ptr, b_ptr, c_ptr, stride, n_cols: tl.constexpr,
                           BLOCK_SIZE: tl.constexpr):
    program_id = tl.program_id(0).to(tl.int64)
    a_ptr += program_id * stride
    b_ptr += program_id * stride
    c_ptr += program_id * stride
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    a_row = tl.load(a_ptr + col_offsets, mask=mask, other=0).to(tl.float32)
    b_row = tl.load(b_ptr + col_offsets, mask=mask, other=0)
    c_row = silu(a_row).cast(b_row.dtype) * b_row
    tl.store(c_ptr + col_offsets, c_row, mask=mask)


@triton.jit
def _swiglu_backward_kernel(dc_ptr, a_ptr, b_ptr, stride, n_cols: tl.constexpr,
                            BLOCK_SIZE: tl.constexpr):
    program_id = tl.program_id(0).to(tl.int64)
    dc_ptr += program_id * stride
    a_ptr += program_id * stride
    b_ptr += program_id * stride
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    dc_row = tl.load(dc_ptr + col_offsets, mask=mask, other=0)
    a_row = tl.load(a_ptr + col_offsets, mask=mask, other=0).to(tl.float32)
    b_row = tl.load(b_ptr + col_offsets, mask=mask, other=0)
    sig_a = tl.sigmoid(a_row)
    silu_a = a_row * sig_a
    db_row = dc_row * silu_a
    da_row = dc_row * (silu_a * (1 - sig_a) + sig_a) * b_row
    tl.store(a_ptr + col_offsets, da_row, mask=mask)
    tl.store(b_ptr + col_offsets, db_row, mask=mask)


def swiglu_forward(a, b):
    ori_shape = a.shape
    n_cols = ori_shape[-1]
    a = a.view(-1, n_cols)
    b = b.view(-1, n_cols)
    c = torch.empty_like(a)
    n_rows = a.shape[0]
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    _swiglu_forward_kernel[(n_rows, )](a, b, c, c.stride(-2), n_cols=n_cols,
                                       BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
    return a, b, c.view(*ori_shape)


def swiglu_backward(a, b, dc):
    ori_shape = dc.shape
    n_cols = ori_shape[-1]
    dc = dc.view(-1, n_cols)
    n_rows = dc.shape[0]
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    _swiglu_backward_kernel[(n_rows, )](dc, a, b, dc.stride(-2), n_cols=n_cols,
                                        BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
    return a.view(*ori_shape), b.view(*ori_shape)


def check(device):
    g = generator(device, 8)
    for shape in ((1, 1), (3, 50), (6, 700) if device == "cpu" else (4096, 3000)):
        a = torch.randn(*shape, device=device, generator=g)
        b = torch.randn(*shape, device=device, generator=g)
        dc = torch.randn(*shape, device=device, generator=g)
        ad, bd = a.double().requires_grad_(), b.double().requires_grad_()
        ref = torch.nn.functional.silu(ad) * bd
        ref.backward(dc.double())
        _, _, c = swiglu_forward(a, b)
        assert_close(c, ref, torch.float32, f"swiglu {shape}", factor=10)
        da, db = swiglu_backward(a.clone(), b.clone(), dc)
        assert_close(da, ad.grad, torch.float32, f"swiglu da {shape}", factor=10)
        assert_close(db, bd.grad, torch.float32, f"swiglu db {shape}", factor=10)


def bench(device):
    a = torch.randn(8192, 11008, device=device).half()
    b = torch.randn(8192, 11008, device=device).half()
    return swiglu_forward, (a, b)
