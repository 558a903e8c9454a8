# %% [markdown]
# # RMSNorm and LayerNorm, forward and backward
#
# Normalization layers read a row, reduce it to one or two statistics, and write it back
# scaled: memory-bound kernels whose speed is set by how close they come to the GPU's copy
# bandwidth. You will learn:
# - how a program works on a 2-D tile of several rows and reduces along the rows
#   (`tl.sum(x, axis=1)`), with fp16/bf16 inputs computed in fp32 and `tl.rsqrt`;
# - how the backward pass computes the input gradient row by row and the weight gradient,
#   a sum over *all* rows, in two stages: each program accumulates its rows in fp32 registers
#   and writes one partial row, then a second kernel adds the partial rows (no atomics, and no
#   precision lost to a long fp16 or fp32 running sum), as Triton's layer-norm tutorial does;
# - how to compare against `torch.nn.functional.rms_norm` / `layer_norm` and the copy
#   bandwidth measured in the same run.
#
# With a GPU the tutorial runs on it; without one it runs through the interpreter at small
# sizes. The shapes are those of docs/benchmarks.md: (B, T, H) with T = 77 and 91 among them, so the
# number of rows B·T is rarely a multiple of a tile.

# %%
import os
import sys

import numpy as np

import tessera
import tessera.language as tl
from tessera.testing import gpu_available

# %% [markdown]
# ## Forward
# RMSNorm(x) = x · rstd · w with rstd = 1 / sqrt(mean(x²) + eps), per row of H elements.
# A program takes `BLOCK_ROWS` rows at once: short rows (H = 128) would leave most threads of
# a program idle, and many small programs cost more than a few large ones. Columns past H and
# rows past the last are masked; their zeros do not change the sums.

# %%
@tessera.jit
def rms_norm_fwd(x_ptr, w_ptr, y_ptr, n_rows, n_cols, eps,
                 BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    cols = tl.arange(0, BLOCK_COLS)
    col_mask = cols < n_cols
    mask = (rows < n_rows)[:, None] & col_mask[None, :]
    offsets = rows.to(tl.int64)[:, None] * n_cols + cols[None, :]  # int64: B·T·H may pass 2^31
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)
    tl.store(y_ptr + offsets, x * rstd[:, None] * w[None, :], mask=mask)


# %% [markdown]
# ## Backward
# With x̂ = x · rstd and g = dy · w (y = x̂ · w), the gradients are
#
#     dx = rstd · (g − x̂ · mean(g · x̂))        per row
#     dw = Σ_rows dy · x̂                        over every row
#
# The backward recomputes rstd from x (one more reduction of data already in registers)
# instead of reading it from the forward. `dx` is one row at a time; for `dw` each of the
# `num_programs` programs walks the row blocks pid, pid + num_programs, ... and keeps its sum
# in a fp32 tile of registers, written once at the end as one partial row. `sum_partials`
# then adds the partial rows column by column, also in fp32.

# %%
@tessera.jit
def rms_norm_bwd(dy_ptr, x_ptr, w_ptr, dx_ptr, dw_partial_ptr, n_rows, n_cols, eps,
                 BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_COLS)
    col_mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK_ROWS, BLOCK_COLS], dtype=tl.float32)
    for start in tl.range(pid * BLOCK_ROWS, n_rows, tl.num_programs(0) * BLOCK_ROWS):
        rows = start + tl.arange(0, BLOCK_ROWS)
        mask = (rows < n_rows)[:, None] & col_mask[None, :]
        offsets = rows.to(tl.int64)[:, None] * n_cols + cols[None, :]
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)
        x_hat = x * rstd[:, None]
        g = dy * w[None, :]
        c = tl.sum(g * x_hat, axis=1) / n_cols
        tl.store(dx_ptr + offsets, rstd[:, None] * (g - x_hat * c[:, None]), mask=mask)
        dw += dy * x_hat
    tl.store(dw_partial_ptr + pid * n_cols + cols, tl.sum(dw, axis=0), mask=col_mask)


@tessera.jit
def sum_partials(partial_ptr, out_ptr, n_partials, n_cols,
                 BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    # Axis 1 of the grid picks one of several stacked (n_partials, n_cols) matrices (LayerNorm's
    # dw and db partials), so that both are summed by one launch.
    matrix = tl.program_id(1)
    partial_ptr += matrix * n_partials * n_cols
    cols = tl.program_id(0) * BLOCK_COLS + tl.arange(0, BLOCK_COLS)
    col_mask = cols < n_cols
    total = tl.zeros([BLOCK_ROWS, BLOCK_COLS], dtype=tl.float32)
    for start in tl.range(0, n_partials, BLOCK_ROWS):
        rows = start + tl.arange(0, BLOCK_ROWS)
        mask = (rows < n_partials)[:, None] & col_mask[None, :]
        total += tl.load(partial_ptr + rows[:, None] * n_cols + cols[None, :], mask=mask,
                         other=0.0)
    tl.store(out_ptr + matrix * n_cols + cols, tl.sum(total, axis=0), mask=col_mask)


# %% [markdown]
# ## LayerNorm
# The same structure with a mean: y = (x − mean) · rstd · w + b, rstd = 1 / sqrt(var + eps).
# Masked columns must not count in the variance, so x − mean is zeroed there. Its backward
# (x̂ = (x − mean) · rstd, g = dy · w):
#
#     dx = rstd · (g − x̂ · mean(g · x̂) − mean(g)),   dw = Σ dy · x̂,   db = Σ dy

# %%
@tessera.jit
def layer_norm_fwd(x_ptr, w_ptr, b_ptr, y_ptr, n_rows, n_cols, eps,
                   BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    cols = tl.arange(0, BLOCK_COLS)
    col_mask = cols < n_cols
    mask = (rows < n_rows)[:, None] & col_mask[None, :]
    offsets = rows.to(tl.int64)[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=1) / n_cols
    centered = tl.where(mask, x - mean[:, None], 0.0)
    rstd = tl.rsqrt(tl.sum(centered * centered, axis=1) / n_cols + eps)
    tl.store(y_ptr + offsets, centered * rstd[:, None] * w[None, :] + b[None, :], mask=mask)


@tessera.jit
def layer_norm_bwd(dy_ptr, x_ptr, w_ptr, dx_ptr, dw_partial_ptr, db_partial_ptr, n_rows,
                   n_cols, eps, BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_COLS)
    col_mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK_ROWS, BLOCK_COLS], dtype=tl.float32)
    db = tl.zeros([BLOCK_ROWS, BLOCK_COLS], dtype=tl.float32)
    for start in tl.range(pid * BLOCK_ROWS, n_rows, tl.num_programs(0) * BLOCK_ROWS):
        rows = start + tl.arange(0, BLOCK_ROWS)
        mask = (rows < n_rows)[:, None] & col_mask[None, :]
        offsets = rows.to(tl.int64)[:, None] * n_cols + cols[None, :]
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=1) / n_cols
        centered = tl.where(mask, x - mean[:, None], 0.0)
        rstd = tl.rsqrt(tl.sum(centered * centered, axis=1) / n_cols + eps)
        x_hat = centered * rstd[:, None]
        g = dy * w[None, :]
        c1 = tl.sum(g * x_hat, axis=1) / n_cols
        c2 = tl.sum(g, axis=1) / n_cols
        dx = rstd[:, None] * (g - x_hat * c1[:, None] - c2[:, None])
        tl.store(dx_ptr + offsets, dx, mask=mask)
        dw += dy * x_hat
        db += dy
    tl.store(dw_partial_ptr + pid * n_cols + cols, tl.sum(dw, axis=0), mask=col_mask)
    tl.store(db_partial_ptr + pid * n_cols + cols, tl.sum(db, axis=0), mask=col_mask)


# %% [markdown]
# ## Host wrappers
# The forward takes tiles of about 2048 elements (16 per thread with 4 warps) whatever H is.
# The backward is built around its row reductions (two per row for RMSNorm, four for
# LayerNorm): `backward_config` keeps each row within one warp, so they are shuffles with no
# barrier (check the PTX: no `bar.sync`, and `ld.global.v4` for x and dy). Its grid is one
# wave: as many programs as ptxas's register count lets be resident (`backward_programs`),
# each walking many row blocks, so that its partial rows stay few and no second wave of
# equally long programs doubles the time. The wrappers take NumPy arrays (interpreter) or CUDA
# tensors with rows of H contiguous elements.

# %%
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
    if not isinstance(x, np.ndarray):
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


def rms_norm(x, w, eps: float = 1e-6, out=None):
    n_rows, n_cols = rows_and_cols(x)
    out = empty(x, x.shape) if out is None else out
    config = tile_config(n_cols)
    grid = (tessera.cdiv(n_rows, config["BLOCK_ROWS"]),)
    rms_norm_fwd[grid](x, w, out, n_rows, n_cols, eps, **config)
    return out


def rms_norm_backward(dy, x, w, eps: float = 1e-6, dx=None):
    n_rows, n_cols = rows_and_cols(x)
    dx = empty(x, x.shape) if dx is None else dx
    config = backward_config(n_cols, reductions_per_row=2)
    programs = backward_programs(rms_norm_bwd, (dy, x, w, dx, None, n_rows, n_cols, eps),
                                 config, n_rows, n_cols)
    partials = empty(x, (programs, n_cols), fp32=True)
    rms_norm_bwd[(programs,)](dy, x, w, dx, partials, n_rows, n_cols, eps, **config)
    return dx, reduce_partials(partials, w)


def layer_norm(x, w, b, eps: float = 1e-5, out=None):
    n_rows, n_cols = rows_and_cols(x)
    out = empty(x, x.shape) if out is None else out
    config = tile_config(n_cols)
    grid = (tessera.cdiv(n_rows, config["BLOCK_ROWS"]),)
    layer_norm_fwd[grid](x, w, b, out, n_rows, n_cols, eps, **config)
    return out


def layer_norm_backward(dy, x, w, eps: float = 1e-5, dx=None):
    n_rows, n_cols = rows_and_cols(x)
    dx = empty(x, x.shape) if dx is None else dx
    config = backward_config(n_cols, reductions_per_row=4)
    programs = backward_programs(layer_norm_bwd,
                                 (dy, x, w, dx, None, None, n_rows, n_cols, eps), config,
                                 n_rows, n_cols)
    partials = empty(x, (2, programs, n_cols), fp32=True)  # dw's and db's, summed together
    layer_norm_bwd[(programs,)](dy, x, w, dx, partials[0], partials[1], n_rows, n_cols, eps,
                                **config)
    dw, db = reduce_partials(partials, w)
    return dx, dw, db


# %% [markdown]
# ## Correctness
# Fresh random inputs (weights and biases too), the (B, T, H) shapes of docs/benchmarks.md (T = 77
# and 91 leave partial row tiles) plus an H that is not a power of two, fp32/fp16/bf16,
# against float64 references of the formulas above. Outputs are poisoned (NaN) first, so an
# element the kernels forgot fails. Bounds (docs/benchmarks.md): ‖out − ref‖ / ‖ref‖ below 1e-5 in
# fp32, 5e-3 in fp16, 1e-2 in bf16, for y, dx, dw and db.

# %%
BOUNDS = {"float32": 1e-5, "float16": 5e-3, "bfloat16": 1e-2}


def rms_norm_reference(x, w, dy, eps):
    rstd = 1 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    x_hat, g = x * rstd, dy * w
    dx = rstd * (g - x_hat * np.mean(g * x_hat, axis=-1, keepdims=True))
    return x_hat * w, dx, np.sum(dy * x_hat, axis=tuple(range(x.ndim - 1)))


def layer_norm_reference(x, w, b, dy, eps):
    centered = x - np.mean(x, axis=-1, keepdims=True)
    rstd = 1 / np.sqrt(np.mean(centered * centered, axis=-1, keepdims=True) + eps)
    x_hat, g = centered * rstd, dy * w
    dx = rstd * (g - x_hat * np.mean(g * x_hat, axis=-1, keepdims=True)
                 - np.mean(g, axis=-1, keepdims=True))
    rows = tuple(range(x.ndim - 1))
    return x_hat * w + b, dx, np.sum(dy * x_hat, axis=rows), np.sum(dy, axis=rows)


def check(shapes, dtype_names, make, to_numpy):
    """make(float32 array, dtype name) -> kernel input; to_numpy(result) -> float64 array."""
    rng = np.random.default_rng()
    for (B, T, H) in shapes:
        for name in dtype_names:
            x, dy = (make(rng.standard_normal((B, T, H)).astype(np.float32), name)
                     for _ in range(2))
            w, b = (make((1 + 0.5 * rng.standard_normal(H)).astype(np.float32), name)
                    for _ in range(2))
            poison = lambda: make(np.full((B, T, H), np.nan, np.float32), name)  # noqa: E731
            xs, dys, ws, bs = (to_numpy(v) for v in (x, dy, w, b))  # the rounded inputs
            results = {
                "rms y": (rms_norm(x, w, 1e-6, out=poison()),),
                "rms dx, dw": rms_norm_backward(dy, x, w, 1e-6, dx=poison()),
                "ln y": (layer_norm(x, w, b, 1e-5, out=poison()),),
                "ln dx, dw, db": layer_norm_backward(dy, x, w, 1e-5, dx=poison()),
            }
            rms_y, rms_dx, rms_dw = rms_norm_reference(xs, ws, dys, 1e-6)
            ln_y, ln_dx, ln_dw, ln_db = layer_norm_reference(xs, ws, bs, dys, 1e-5)
            references = {"rms y": (rms_y,), "rms dx, dw": (rms_dx, rms_dw),
                          "ln y": (ln_y,), "ln dx, dw, db": (ln_dx, ln_dw, ln_db)}
            errors = []
            for key, outs in results.items():
                for out, ref in zip(outs, references[key]):
                    err = tessera.testing.relative_error(to_numpy(out), ref)
                    assert err < BOUNDS[name], f"{(B, T, H)} {name} {key}: error {err}"
                    errors.append(err)
            print(f"(B, T, H) = {(B, T, H)!s:<17} {name:<9} largest relative error "
                  f"{max(errors):.1e}  ok")


def run_checks():
    if gpu_available():
        import torch

        def to_torch(x, name):
            return torch.from_numpy(x).to("cuda", getattr(torch, name))

        check([(512, 77, 128), (1024, 91, 256), (2048, 96, 512), (3, 33, 1000)],
              ["float32", "float16", "bfloat16"], to_torch, lambda t: t.double().cpu().numpy())
    else:
        import ml_dtypes

        tessera.config.knobs.interpret = True
        print("no GPU: running through the interpreter")
        numpy_dtypes = {"float32": np.float32, "float16": np.float16,
                        "bfloat16": ml_dtypes.bfloat16}
        check([(2, 77, 96), (1, 91, 128)], ["float32", "float16", "bfloat16"],
              lambda x, name: x.astype(numpy_dtypes[name]), lambda x: x.astype(np.float64))


run_checks()

# %% [markdown]
# ## Benchmark
# GB/s of each pass, counting the bytes it must move: forward reads x and writes y (2 · size),
# backward reads x and dy and writes dx (3 · size); weights and partial rows are negligible.
# Against `torch.nn.functional.rms_norm` / `layer_norm` (backward through autograd) and a
# device-to-device copy of x (the ceiling), measured in the same run; fp32, B = 2048.

# %%
def benchmark(shapes=((2048, 77, 128), (2048, 96, 256), (2048, 128, 512), (2048, 91, 512)),
              dtype_name: str = "float32"):
    import torch
    import torch.nn.functional as F
    from tessera.testing import do_bench

    dtype = getattr(torch, dtype_name)
    rows = []
    for (B, T, H) in shapes:
        x = torch.randn((B, T, H), device="cuda", dtype=dtype, requires_grad=True)
        w = torch.randn(H, device="cuda", dtype=dtype, requires_grad=True)
        b = torch.randn(H, device="cuda", dtype=dtype, requires_grad=True)
        dy = torch.randn_like(x)
        size = x.numel() * x.element_size()
        gbps = lambda ms, nbytes: nbytes / ms / 1e6  # noqa: E731
        copy_dst = torch.empty_like(x)
        copy = gbps(do_bench(lambda: copy_dst.copy_(x), return_mode="median"), 2 * size)
        xd, wd, bd = x.detach(), w.detach(), b.detach()
        y_rms = F.rms_norm(x, (H,), w, 1e-6)
        y_ln = F.layer_norm(x, (H,), w, b, 1e-5)
        cases = {
            "rms fwd": (lambda: rms_norm(xd, wd, 1e-6), lambda: F.rms_norm(xd, (H,), wd, 1e-6),
                        2 * size),
            "rms bwd": (lambda: rms_norm_backward(dy, xd, wd, 1e-6),
                        lambda: torch.autograd.grad(y_rms, (x, w), dy, retain_graph=True),
                        3 * size),
            "ln fwd": (lambda: layer_norm(xd, wd, bd, 1e-5),
                       lambda: F.layer_norm(xd, (H,), wd, bd, 1e-5), 2 * size),
            "ln bwd": (lambda: layer_norm_backward(dy, xd, wd, 1e-5),
                       lambda: torch.autograd.grad(y_ln, (x, w, b), dy, retain_graph=True),
                       3 * size),
        }
        for name, (ours, theirs, nbytes) in cases.items():
            ours_gbps = gbps(do_bench(ours, return_mode="median"), nbytes)
            torch_gbps = gbps(do_bench(theirs, return_mode="median"), nbytes)
            rows.append((name, (B, T, H), ours_gbps, torch_gbps, copy))
    print(f"{'pass':<8} {'(B, T, H)':<17} {'tessera GB/s':>13} {'torch GB/s':>11} "
          f"{'copy GB/s':>10} {'vs copy':>8} {'vs torch':>9}")
    for name, shape, ours, theirs, copy in rows:
        print(f"{name:<8} {shape!s:<17} {ours:>13.0f} {theirs:>11.0f} {copy:>10.0f} "
              f"{ours / copy:>8.1%} {ours / theirs:>8.2f}x")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        plt.figure(figsize=(9, 4))
        positions = np.arange(len(rows))
        plt.bar(positions - 0.2, [r[2] for r in rows], 0.4, label="tessera")
        plt.bar(positions + 0.2, [r[3] for r in rows], 0.4, label="torch")
        plt.plot(positions, [r[4] for r in rows], "k_", markersize=20, label="copy")
        plt.xticks(positions, [f"{r[0]}\n{r[1][1]}x{r[1][2]}" for r in rows], fontsize=7)
        plt.ylabel("GB/s")
        plt.legend()
        path = os.environ.get("TUTORIAL_PLOT", "rms-norm.png")
        plt.savefig(path, dpi=100, bbox_inches="tight")
        print(f"plot: {path}")
    except ImportError:
        pass
    return rows


if gpu_available() and "--no-bench" not in sys.argv:
    benchmark()

# %% [markdown]
# ## In the library
# The same kernels and wrappers are `tessera.ops.rms_norm`, `rms_norm_backward`, `layer_norm`
# and `layer_norm_backward` (`from tessera.ops import rms_norm`), which the tests and
# `benchmarks/norms.py` use.
