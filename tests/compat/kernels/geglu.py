"""GEGLU with the tanh approximation of GELU, as LLM kernel libraries write it: the tanh
comes from libdevice (``triton.language.extra.libdevice``), computed in fp32."""
import torch

import tessera as triton
import tessera.language as tl
from tessera.language.extra import libdevice

from .common import assert_close, generator

tanh = libdevice.tanh


@triton.jit
def _geglu_tanh_forward_kernel(a, b, c, stride, n_cols: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    program_id = tl.program_id(0).to(tl.int64)
    a += program_id * stride
    b += program_id * stride
    c += program_id * stride
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    a_row = tl.load(a + col_offsets, mask=mask, other=0).to(tl.float32)
    b_row = tl.load(b + col_offsets, mask=mask, other=0)
    sqrt_2_over_pi = 0.7978845608028654
    a_cubed = a_row * a_row * a_row
    tanh_arg = sqrt_2_over_pi * (a_row + 0.044715 * a_cubed)
    tanh_result = tanh(tanh_arg)
    geglu_a = 0.5 * a_row * (1 + tanh_result)
    c_row = geglu_a.cast(b_row.dtype) * b_row
    tl.store(c + col_offsets, c_row, mask=mask)


def geglu_forward(a, b):
    ori_shape = a.shape
    n_cols = ori_shape[-1]
    a = a.view(-1, n_cols)
    b = b.view(-1, n_cols)
    c = torch.empty_like(a)
    n_rows = a.shape[0]
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    num_warps = 4 if BLOCK_SIZE < 2048 else 8
    _geglu_tanh_forward_kernel[(n_rows, )](a, b, c, c.stride(-2), n_cols=n_cols,
                                           BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
    return c.view(*ori_shape)


def check(device):
    g = generator(device, 7)
    for shape in ((1, 1), (4, 9, 100), (3, 5, 1000) if device == "cpu" else (8, 512, 11008)):
        a = torch.randn(*shape, device=device, generator=g).half()
        b = torch.randn(*shape, device=device, generator=g).half()
        ref = torch.nn.functional.gelu(a.double(), approximate="tanh") * b.double()
        assert_close(geglu_forward(a, b), ref, torch.float16, f"geglu {shape}")


def bench(device):
    a = torch.randn(8, 2048, 11008, device=device).half()
    b = torch.randn(8, 2048, 11008, device=device).half()
    return geglu_forward, (a, b)
