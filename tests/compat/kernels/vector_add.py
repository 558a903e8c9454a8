"""Vector addition as Triton's first tutorial writes it: a grid lambda over meta-parameters."""
import torch

import tessera as triton
import tessera.language as tl

from .common import assert_close, generator


@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    output = x + y
    tl.store(output_ptr + offsets, output, mask=mask)


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    output = torch.empty_like(x)
    assert x.device == y.device and output.device == x.device
    n_elements = output.numel()
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]), )
    add_kernel[grid](x, y, output, n_elements, BLOCK_SIZE=1024)
    return output


def check(device):
    g = generator(device, 1)
    for n in (1, 98432 if device != "cpu" else 3001):
        x = torch.rand(n, device=device, generator=g)
        y = torch.rand(n, device=device, generator=g)
        assert_close(add(x, y), x.double() + y.double(), torch.float32, f"add n={n}")


def bench(device):
    x = torch.rand(2 ** 26, device=device)
    y = torch.rand(2 ** 26, device=device)
    return add, (x, y)
