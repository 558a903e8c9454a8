"""A row kernel launched on a padded grid that leaves early (``if row >= n_rows: return``),
reads an optional bias passed as ``None`` (specialized away), and uses ``tl.debug_barrier``
and ``tl.device_assert``, as real kernels' host wrappers round grids up."""
import torch

import tessera as triton
import tessera.language as tl

from .common import assert_close, generator


@triton.jit
def scale_rows_kernel(x_ptr, bias_ptr, out_ptr, n_rows, n_cols, stride, scale,
                      BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    if row >= n_rows:
        return
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    y = x * scale
    if bias_ptr is not None:
        y += tl.load(bias_ptr + cols, mask=mask, other=0.0)
    tl.device_assert(n_cols <= BLOCK_N, "row longer than the block")
    tl.debug_barrier()
    tl.store(out_ptr + row * stride + cols, y, mask=mask)


def scale_rows(x, scale, bias=None):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    grid = (triton.cdiv(n_rows, 8) * 8, )  # padded to a multiple of 8 programs
    scale_rows_kernel[grid](x, bias, out, n_rows, n_cols, x.stride(0), scale,
                            BLOCK_N=triton.next_power_of_2(n_cols))
    return out


def check(device):
    g = generator(device, 13)
    for rows, cols in ((1, 1), (13, 100), (37, 300)):
        x = torch.randn(rows, cols, device=device, generator=g)
        bias = torch.randn(cols, device=device, generator=g)
        assert_close(scale_rows(x, 1.5), x.double() * 1.5, torch.float32, "no bias")
        assert_close(scale_rows(x, -0.25, bias), x.double() * -0.25 + bias.double(),
                     torch.float32, "bias")


def bench(device):
    return scale_rows, (torch.randn(8192, 4096, device=device), 2.0)
