"""The norms' tiles and the host helpers their launches share: forward and backward tiles,
the backward's one-wave grid (from ptxas's register count) and the sum of its partial rows."""
import numpy as np

import tessera

from .kernels import sum_partials


def tile_config(n_cols: int, elements: int = 2048) -> dict:
    block_cols = 1 << max(0, (n_cols - 1).bit_length())
    block_rows = max(1, min(16, elements // block_cols))
    return {"BLOCK_ROWS": block_rows, "BLOCK_COLS": block_cols,
            "num_warps": 4 if block_rows * block_cols <= 2048 else 8}


def backward_config(n_cols: int, reductions_per_row: int) -> dict:
    """The backward's tile: every row reduction (four per row for LayerNorm) within one warp.

    A warp covers 128 columns with 16-byte vectors (4 fp32 per thread), and warps are laid
    along the columns first, so a wider row split over warps would reduce through shared memory
    with two barriers per reduction, in the loop. Up to 128 columns, 4 warps over 1024 elements
    (8 rows of 128); up to 512, one warp per program with 16 elements per thread (ptxas: 128 for
    LayerNorm, 16 programs per SM, each loading 4 KiB of x and dy per step). Wider rows fall back
    to tile_config's tiles (reductions across warps).

    One warp per row pays off when a row needs several reductions (LayerNorm: 4); with two
    (RMSNorm) the 4-warp tile measured faster on an H200 for 256 and 512 columns (81-85% of
    the copy bandwidth with one warp, 84-94% with four), so RMSNorm keeps it.

    Measured on an H200 for LayerNorm at 128 columns: the 4-warp tile of 8 rows gives 79-82% of
    the copy bandwidth, the one-warp tile of 4 rows only 73-76% (although the occupancy model
    predicts more bytes in flight for it), so the 4-warp tile stays there."""
    if reductions_per_row <= 2:
        config = tile_config(n_cols, elements=1024)
    else:
        block_cols = 1 << max(0, (n_cols - 1).bit_length())
        if block_cols <= 128:
            config = {"BLOCK_ROWS": 1024 // block_cols, "BLOCK_COLS": block_cols, "num_warps": 4}
        elif block_cols <= 512:
            config = {"BLOCK_ROWS": 512 // block_cols, "BLOCK_COLS": block_cols, "num_warps": 1}
        else:
            config = tile_config(n_cols, elements=1024)
    # LayerNorm's narrow rows: prefetch the next row block of x and dy (cp.async into a 2-slot
    # ring) while this one reduces. Measured on an H200 (fp32, B = 2048): at H = 128 it went
    # from 82.9-88.3% to 85.5-88.9% of the copy bandwidth; at H = 256 and 512 the ring made it
    # slower (81.7% instead of 85.0%, 72.8% instead of 87.5%), so wider rows are not
    # prefetched. RMSNorm gained less (87.7-90.4% to 90.3-92.0%) and its bf16 tile then
    # spilled 4 bytes, so it keeps one stage.
    prefetch = reductions_per_row > 2 and config["BLOCK_COLS"] <= 128
    return {**config, "num_stages": 2 if prefetch else 1}


def empty(like, shape, fp32: bool = False):
    """An uninitialized array or tensor of `like`'s kind and device, in its dtype or fp32."""
    if isinstance(like, np.ndarray):
        return np.empty(shape, np.float32 if fp32 else like.dtype)
    import torch
    return torch.empty(shape, device=like.device, dtype=torch.float32 if fp32 else like.dtype)


def rows_and_cols(x):
    return int(np.prod(x.shape[:-1])), int(x.shape[-1])


def backward_programs(kernel, args: tuple, config: dict, n_rows: int, n_cols: int) -> int:
    """As many programs as are resident at once: one wave, each walking its share of the row
    blocks. On a GPU that is SMs x blocks per SM, from the registers ptxas gave the kernel
    (a fixed guess is wrong: a LayerNorm tile of 4 warps at 80 registers fits 6 blocks per SM,
    not 8, and a second wave of equally long programs would double the time)."""
    resident = 8  # the interpreter: a few programs, so that each walks several row blocks
    x = args[1]
    if getattr(x, "is_cuda", False):  # NumPy arrays and CPU tensors run in the interpreter
        key = (kernel.fn.__name__, str(x.dtype), x.device.index, n_rows % 16 == 0,
               n_cols % 16 == 0, tuple(sorted(config.items())))
        if key not in _resident_programs:
            from tessera.autotuner import resources
            from tessera.runtime import driver
            scratch = empty(x, (1, n_cols), fp32=True)  # stands for the partial rows
            args = tuple(scratch if a is None else a for a in args)
            metadata = kernel.compile(*args, **config).metadata
            props = driver.get_device_properties(x.device.index or 0)
            blocks, _ = resources.occupancy(resources.from_metadata(metadata), props)
            _resident_programs[key] = max(1, blocks) * props.multiprocessor_count
        resident = _resident_programs[key]
    return max(1, min(tessera.cdiv(n_rows, config["BLOCK_ROWS"]), resident))


_resident_programs: dict = {}


def reduce_partials(partials, like):
    """Column sums of fp32 partial rows, in `like`'s dtype: (n_partials, n_cols) gives
    (n_cols,); a stack (m, n_partials, n_cols) gives (m, n_cols) from one launch."""
    *stack, n_partials, n_cols = partials.shape
    out = empty(like, (*stack, n_cols))
    grid = (tessera.cdiv(n_cols, PARTIALS_CONFIG["BLOCK_COLS"]), stack[0] if stack else 1)
    sum_partials[grid](partials, out, n_partials, n_cols, **PARTIALS_CONFIG)
    return out


# sum_partials reads partial rows just written (in L2) but the backward makes many of them: one
# per SM-resident program, 800-2700 rows. Its time is the number of dependent row steps, so a
# program takes 2 columns (an 8-byte vector per row) over 1024 rows per step (4 per thread),
# and the columns give the parallelism: H / 2 programs per matrix. Measured on an H200 for two
# stacked (P, H) matrices: 5.5 us at (792, 128), 8.9 us at (2112, 256), 12.1 us at (2112, 512);
# 4 columns took 6.6-12.3 us, and the former tile (32 columns x 256 rows, H / 32 programs of
# up to 9 steps) 15-38 us, which had held LayerNorm's backward at 75-86% of the copy bandwidth.
PARTIALS_CONFIG = {"BLOCK_ROWS": 1024, "BLOCK_COLS": 2, "num_warps": 8}
