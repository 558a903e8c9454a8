"""Seeded dropout in the style of Triton's low-memory-dropout tutorial: the keep mask is
regenerated from (seed, offset) with ``tl.rand`` instead of being stored."""
import torch

import tessera as triton
import tessera.language as tl

from .common import assert_close, generator


@triton.jit
def _seeded_dropout(x_ptr, output_ptr, n_elements, p, seed, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    random = tl.rand(seed, offsets)
    x_keep = random > p
    output = tl.where(x_keep, x / (1 - p), 0.0)
    tl.store(output_ptr + offsets, output, mask=mask)


def seeded_dropout(x, p, seed):
    output = torch.empty_like(x)
    assert x.is_contiguous()
    n_elements = x.numel()
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]), )
    _seeded_dropout[grid](x, output, n_elements, p, seed, BLOCK_SIZE=1024)
    return output


def check(device):
    g = generator(device, 6)
    n = 5000 if device == "cpu" else 1_000_003
    x = torch.rand(n, device=device, generator=g) + 0.5  # never 0: a zero output means dropped
    p = 0.3
    a = seeded_dropout(x, p, 123)
    b = seeded_dropout(x, p, 123)
    c = seeded_dropout(x, p, 512)
    assert torch.equal(a, b), "the same seed must give the same mask"
    assert not torch.equal(a, c), "another seed must give another mask"
    kept = a != 0
    assert_close(a[kept], x[kept].double() / (1 - p), torch.float32, "kept values")
    rate = 1 - kept.double().mean().item()
    assert abs(rate - p) < 5 / n ** 0.5, f"dropped fraction {rate:.4f}, expected {p}"


def bench(device):
    return seeded_dropout, (torch.rand(2 ** 24, device=device), 0.5, 42)
