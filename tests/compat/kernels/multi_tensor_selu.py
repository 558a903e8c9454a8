"""A multi-tensor ("foreach") kernel as Triton 3.x code writes it: the tensors come as a tuple
argument (one launch for several tensors, indexed with constexpr indices in a static loop),
and a piecewise activation applied with ``tl.map_elementwise`` (a scalar function with a
branch per element)."""
import torch

import tessera as triton
import tessera.language as tl

from .common import assert_close, generator

ALPHA = tl.constexpr(1.6732632423543772)
SCALE = tl.constexpr(1.0507009873554805)


@triton.jit
def _selu_scalar(x):
    if x > 0:
        return SCALE * x
    else:
        return SCALE * ALPHA * (tl.exp(x) - 1.0)


@triton.jit
def _multi_selu_kernel(inputs, outputs, sizes, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    for i in tl.static_range(len(inputs)):
        mask = offsets < sizes[i]
        x = tl.load(inputs[i] + offsets, mask=mask, other=0.0).to(tl.float32)
        y = tl.map_elementwise(_selu_scalar, x)
        tl.store(outputs[i] + offsets, y.to(outputs[i].dtype.element_ty), mask=mask)


def multi_selu(tensors):
    outputs = tuple(torch.empty_like(t) for t in tensors)
    sizes = tuple(t.numel() for t in tensors)
    BLOCK_SIZE = 1024
    grid = (triton.cdiv(max(sizes), BLOCK_SIZE), )
    _multi_selu_kernel[grid](tuple(tensors), outputs, sizes, BLOCK_SIZE=BLOCK_SIZE)
    return outputs


def check(device):
    g = generator(device, 11)
    sizes = (1, 1000, 3001) if device == "cpu" else (1, 100_000, 3_000_001)
    tensors = [torch.randn(n, device=device, generator=g) for n in sizes]
    tensors[1] = tensors[1].half()
    for out, x in zip(multi_selu(tensors), tensors):
        ref = torch.nn.functional.selu(x.double())
        assert_close(out, ref, x.dtype, f"multi_selu n={x.numel()} {x.dtype}")


def bench(device):
    tensors = tuple(torch.randn(2 ** 24, device=device) for _ in range(4))
    return multi_selu, (tensors,)
