"""RMSNorm and LayerNorm, forward and backward: memory-bound row kernels.

Forward: a program normalizes BLOCK_ROWS rows of H at once (tiles of about 2048 elements),
in float32. Backward: dx row by row, and the weight (and bias) gradients, sums over *all*
rows, in two stages: each program walks many row blocks keeping its sums in float32 registers
and writes one partial row, then `sum_partials` adds the partial rows (no atomics). The
backward's grid is one wave of resident programs (from ptxas's register count), and its tile
keeps LayerNorm's four row reductions within a warp. tutorials/05-rms-norm.py derives it.
"""
import numpy as np

import tessera
import tessera.language as tl

from . import torch_ops


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


def rms_norm(x, w, eps: float = 1e-6, out=None):
    """RMSNorm forward: ``y = x · rstd · w`` with ``rstd = 1 / sqrt(mean(x²) + eps)`` per row.

    Args:
        x: (..., H) float32, float16 or bfloat16, contiguous (rows of H elements); a CUDA
            torch tensor runs on the GPU, a NumPy array (or a CPU tensor with
            ``TESSERA_INTERPRET=1``) through the interpreter. Computed in float32.
        w: (H,) weight. eps: added to the mean square.
        out: written when given (like x).

    Returns:
        ``y``: like x (shape and dtype). Differentiable in x and w for torch tensors (through
        the ``tessera::rms_norm`` custom op, also under torch.compile: torch_ops.py).

    Example::

        import torch
        from tessera.ops import rms_norm
        x = torch.randn(8, 77, 512, device="cuda", dtype=torch.bfloat16)
        w = torch.ones(512, device="cuda", dtype=torch.bfloat16)
        y = rms_norm(x, w, 1e-6)  # torch.nn.functional.rms_norm(x, (512,), w, 1e-6)
    """
    if out is None and torch_ops.wants_op(x, w):  # autograd or torch.compile: the custom op
        return torch_ops.library(_register_ops).rms_norm(x, w, eps)
    return rms_norm_forward(x, w, eps, out)


def rms_norm_forward(x, w, eps: float = 1e-6, out=None):
    """:func:`rms_norm`'s launch, never through the custom op (what the op runs)."""
    n_rows, n_cols = rows_and_cols(x)
    out = empty(x, x.shape) if out is None else out
    config = tile_config(n_cols)
    grid = (tessera.cdiv(n_rows, config["BLOCK_ROWS"]),)
    rms_norm_fwd[grid](x, w, out, n_rows, n_cols, eps, **config)
    return out


def rms_norm_backward(dy, x, w, eps: float = 1e-6, dx=None):
    """RMSNorm backward: ``(dx, dw)`` of ``rms_norm(x, w, eps)`` for the output gradient dy.

    With x̂ = x · rstd and g = dy · w: ``dx = rstd · (g − x̂ · mean(g · x̂))`` per row and
    ``dw = Σ_rows dy · x̂``, summed in float32 (one partial row per program, then a second
    kernel adds the partial rows; no atomics). rstd is recomputed from x.

    Args:
        dy, x: (..., H) contiguous, one dtype (float32, float16 or bfloat16); w: (H,).
        dx: written when given (like x).

    Returns:
        ``(dx, dw)``: dx like x, dw (H,) in w's dtype.

    Example::

        from tessera.ops import rms_norm_backward
        dx, dw = rms_norm_backward(torch.randn_like(x), x, w, 1e-6)
    """
    n_rows, n_cols = rows_and_cols(x)
    dx = empty(x, x.shape) if dx is None else dx
    config = backward_config(n_cols, reductions_per_row=2)
    programs = backward_programs(rms_norm_bwd, (dy, x, w, dx, None, n_rows, n_cols, eps),
                                 config, n_rows, n_cols)
    partials = empty(x, (programs, n_cols), fp32=True)
    rms_norm_bwd[(programs,)](dy, x, w, dx, partials, n_rows, n_cols, eps, **config)
    return dx, reduce_partials(partials, w)


def layer_norm(x, w, b, eps: float = 1e-5, out=None):
    """LayerNorm forward: ``y = (x − mean) · rstd · w + b``, ``rstd = 1 / sqrt(var + eps)``
    per row (the biased variance, as torch.nn.functional.layer_norm).

    Args:
        x: (..., H) float32, float16 or bfloat16, contiguous; a CUDA torch tensor runs on the
            GPU, a NumPy array (or a CPU tensor with ``TESSERA_INTERPRET=1``) through the
            interpreter. Computed in float32.
        w, b: (H,) weight and bias. eps: added to the variance.
        out: written when given (like x).

    Returns:
        ``y``: like x (shape and dtype). Differentiable in x, w and b for torch tensors
        (through the ``tessera::layer_norm`` custom op, also under torch.compile).

    Example::

        import torch
        from tessera.ops import layer_norm
        x = torch.randn(8, 77, 512, device="cuda")
        w, b = torch.ones(512, device="cuda"), torch.zeros(512, device="cuda")
        y = layer_norm(x, w, b, 1e-5)  # F.layer_norm(x, (512,), w, b, 1e-5)
    """
    if out is None and torch_ops.wants_op(x, w, b):  # autograd or torch.compile: the op
        return torch_ops.library(_register_ops).layer_norm(x, w, b, eps)
    return layer_norm_forward(x, w, b, eps, out)


def layer_norm_forward(x, w, b, eps: float = 1e-5, out=None):
    """:func:`layer_norm`'s launch, never through the custom op (what the op runs)."""
    n_rows, n_cols = rows_and_cols(x)
    out = empty(x, x.shape) if out is None else out
    config = tile_config(n_cols)
    grid = (tessera.cdiv(n_rows, config["BLOCK_ROWS"]),)
    layer_norm_fwd[grid](x, w, b, out, n_rows, n_cols, eps, **config)
    return out


def layer_norm_backward(dy, x, w, eps: float = 1e-5, dx=None):
    """LayerNorm backward: ``(dx, dw, db)`` of ``layer_norm(x, w, b, eps)`` for dy.

    With x̂ = (x − mean) · rstd and g = dy · w: ``dx = rstd · (g − x̂ · mean(g · x̂) −
    mean(g))`` per row, ``dw = Σ_rows dy · x̂``, ``db = Σ_rows dy``, summed in float32 (partial
    rows per program, added by one more launch; no atomics). The bias is not needed.

    Args:
        dy, x: (..., H) contiguous, one dtype (float32, float16 or bfloat16); w: (H,).
        dx: written when given (like x).

    Returns:
        ``(dx, dw, db)``: dx like x, dw and db (H,) in w's dtype.

    Example::

        from tessera.ops import layer_norm_backward
        dx, dw, db = layer_norm_backward(torch.randn_like(x), x, w, 1e-5)
    """
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


# ------------------------------------------------------------------------ the custom ops
# What they share with matmul's (wants_op, run, library): torch_ops.py. Module-level names
# are the launches (rms_norm_backward, ...); the ops are these functions' locals.

def _register_ops():
    """Defines ``tessera::rms_norm``, ``tessera::layer_norm`` and their backward ops."""
    import torch
    from torch import Tensor

    @torch.library.custom_op("tessera::rms_norm", mutates_args=())
    def rms_norm_op(x: Tensor, w: Tensor, eps: float) -> Tensor:
        return torch_ops.run(rms_norm_forward, x.contiguous(), w.contiguous(), eps)

    @rms_norm_op.register_fake
    def _(x, w, eps):
        return torch.empty_like(x, memory_format=torch.contiguous_format)

    @torch.library.custom_op("tessera::rms_norm_backward", mutates_args=())
    def rms_norm_backward_op(dy: Tensor, x: Tensor, w: Tensor,
                             eps: float) -> tuple[Tensor, Tensor]:
        return torch_ops.run(rms_norm_backward, dy.contiguous(), x.contiguous(),
                             w.contiguous(), eps)

    @rms_norm_backward_op.register_fake
    def _(dy, x, w, eps):
        return torch.empty_like(x, memory_format=torch.contiguous_format), torch.empty_like(w)

    def rms_setup(ctx, inputs, output):
        x, w, eps = inputs
        ctx.save_for_backward(x, w)
        ctx.eps = eps

    def rms_backward(ctx, dy):
        x, w = ctx.saved_tensors
        dx, dw = rms_norm_backward_op(dy, x, w, ctx.eps)
        return dx, dw, None

    rms_norm_op.register_autograd(rms_backward, setup_context=rms_setup)

    @torch.library.custom_op("tessera::layer_norm", mutates_args=())
    def layer_norm_op(x: Tensor, w: Tensor, b: Tensor, eps: float) -> Tensor:
        return torch_ops.run(layer_norm_forward, x.contiguous(), w.contiguous(),
                             b.contiguous(), eps)

    @layer_norm_op.register_fake
    def _(x, w, b, eps):
        return torch.empty_like(x, memory_format=torch.contiguous_format)

    @torch.library.custom_op("tessera::layer_norm_backward", mutates_args=())
    def layer_norm_backward_op(dy: Tensor, x: Tensor, w: Tensor,
                               eps: float) -> tuple[Tensor, Tensor, Tensor]:
        dx, dw, db = torch_ops.run(layer_norm_backward, dy.contiguous(), x.contiguous(),
                                   w.contiguous(), eps)
        return dx, dw, db.clone()  # dw and db are rows of one tensor; an op's outputs may not alias

    @layer_norm_backward_op.register_fake
    def _(dy, x, w, eps):
        return (torch.empty_like(x, memory_format=torch.contiguous_format),
                torch.empty_like(w), torch.empty_like(w))

    def layer_setup(ctx, inputs, output):
        x, w, b, eps = inputs
        ctx.save_for_backward(x, w)
        ctx.eps = eps

    def layer_backward(ctx, dy):
        x, w = ctx.saved_tensors
        dx, dw, db = layer_norm_backward_op(dy, x, w, ctx.eps)
        return dx, dw, db, None

    layer_norm_op.register_autograd(layer_backward, setup_context=layer_setup)
