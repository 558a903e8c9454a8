"""The RMSNorm and LayerNorm kernels (the package docstring says how they split the work)."""
import tessera
import tessera.language as tl


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
