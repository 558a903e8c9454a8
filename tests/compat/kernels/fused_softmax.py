"""Row softmax in the style of Triton's fused-softmax tutorial: the block is the row length
rounded up with next_power_of_2, the grid is sized from the SM count the driver reports, and
the programs loop over rows with ``tl.range(..., num_stages=)``."""
import torch

import tessera as triton
import tessera.language as tl
from tessera.runtime import driver

from .common import assert_close, generator


@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_rows, n_cols,
                   BLOCK_SIZE: tl.constexpr, num_stages: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step, num_stages=num_stages):
        row_start_ptr = input_ptr + row_idx * input_row_stride
        col_offsets = tl.arange(0, BLOCK_SIZE)
        input_ptrs = row_start_ptr + col_offsets
        mask = col_offsets < n_cols
        row = tl.load(input_ptrs, mask=mask, other=-float("inf"))
        row_minus_max = row - tl.max(row, axis=0)
        numerator = tl.exp(row_minus_max)
        denominator = tl.sum(numerator, axis=0)
        softmax_output = numerator / denominator
        output_row_start_ptr = output_ptr + row_idx * output_row_stride
        output_ptrs = output_row_start_ptr + col_offsets
        tl.store(output_ptrs, softmax_output, mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    num_warps = 8
    num_stages = 2
    y = torch.empty_like(x)
    if x.is_cuda:
        properties = driver.active.utils.get_device_properties(x.device.index or 0)
        num_programs = min(properties["multiprocessor_count"] * 4, n_rows)
    else:
        num_programs = min(4, n_rows)
    softmax_kernel[(num_programs, 1, 1)](y, x, x.stride(0), y.stride(0), n_rows, n_cols,
                                         BLOCK_SIZE=BLOCK_SIZE, num_stages=num_stages,
                                         num_warps=num_warps)
    return y


def check(device):
    g = generator(device, 2)
    for rows, cols in ((1, 1), (7, 97), (33, 781) if device == "cpu" else (1823, 781)):
        x = torch.randn(rows, cols, device=device, generator=g)
        assert_close(softmax(x), torch.softmax(x.double(), dim=1), torch.float32,
                     f"softmax {rows}x{cols}")


def bench(device):
    return softmax, (torch.randn(4096, 4096, device=device),)
