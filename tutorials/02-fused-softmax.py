# %% [markdown]
# # Fused softmax
#
# Softmax along the rows of a matrix, softmax(x)ᵢ = exp(xᵢ − max(x)) / Σⱼ exp(xⱼ − max(x)),
# written as one kernel: each row is read once and written once, where an unfused version
# (max, subtract, exp, sum, divide as separate operations) moves it through memory five times.
# You will learn:
# - reductions along one axis of a tile: `tl.max(x, axis=1)`, `tl.sum(x, axis=1)`;
# - masking with `other=-inf`, so that padding lanes vanish from both the max and the sum;
# - `tl.exp` (a fast `ex2.approx` instruction on the GPU) with fp16/bf16 computed in fp32;
# - tiles of several rows for short rows, and more warps for long ones;
# - how the result compares with `torch.softmax` and the copy bandwidth.
#
# With a GPU the tutorial runs on it; without one it runs through the interpreter at small
# sizes.

# %%
import os
import sys

import numpy as np

import tessera
import tessera.language as tl
from tessera.testing import gpu_available

# %% [markdown]
# ## The kernel
# A program takes `BLOCK_ROWS` rows of `BLOCK_COLS` (the row length rounded up to a power of
# two) columns. Lanes past the row's end load -inf: exp(-inf − max) = 0, so they add nothing to
# the sum, and -inf never wins the max (a row has at least one real element). Rows past the
# last are masked off entirely. The division is one reciprocal per row and a multiply per
# element.

# %%
@tessera.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_rows, n_cols,
                   BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    cols = tl.arange(0, BLOCK_COLS)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    rows = rows.to(tl.int64)  # rows · stride may pass 2^31
    x = tl.load(in_ptr + rows[:, None] * in_row_stride + cols[None, :], mask=mask,
                other=-float("inf")).to(tl.float32)
    shifted = x - tl.max(x, axis=1)[:, None]
    numerator = tl.exp(shifted)
    inverse = 1.0 / tl.sum(numerator, axis=1)
    tl.store(out_ptr + rows[:, None] * out_row_stride + cols[None, :],
             numerator * inverse[:, None], mask=mask)


# %% [markdown]
# ## The host wrapper
# Tiles of at least 2048 elements: a row of 128 shares its program with 15 others; rows from
# 2048 columns on get a program each, with one warp per 512 elements (16 per thread, up to
# 32 warps for rows of 16384 and more).

# %%
def softmax_config(n_cols: int) -> dict:
    block_cols = 1 << max(0, (n_cols - 1).bit_length())
    block_rows = max(1, 2048 // block_cols)
    return {"BLOCK_ROWS": block_rows, "BLOCK_COLS": block_cols,
            "num_warps": min(32, max(4, block_rows * block_cols // 512))}


def softmax(x, out=None):
    """Row-wise softmax of a 2-D NumPy array (interpreter) or CUDA tensor; rows may be strided
    (the row stride is a parameter), columns must be contiguous."""
    n_rows, n_cols = x.shape
    if out is None:
        out = np.empty_like(x) if isinstance(x, np.ndarray) else x.new_empty(x.shape)
    stride = (lambda a: a.strides[0] // a.itemsize) if isinstance(x, np.ndarray) else (
        lambda a: a.stride(0))
    config = softmax_config(n_cols)
    grid = (tessera.cdiv(n_rows, config["BLOCK_ROWS"]),)
    softmax_kernel[grid](out, x, stride(x), stride(out), n_rows, n_cols, **config)
    return out


# %% [markdown]
# ## Correctness
# Fresh random inputs with a wide spread (so that the max matters), row lengths from 1 to
# 32768 that are mostly not powers of two, fp32/fp16/bf16, against a float64 reference. The
# output is poisoned (NaN) first. Bounds (docs/benchmarks.md): ‖out − ref‖ / ‖ref‖ below 1e-5 in
# fp32, 5e-3 in fp16 and 1e-2 in bf16.

# %%
BOUNDS = {"float32": 1e-5, "float16": 5e-3, "bfloat16": 1e-2}


def reference(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def check(shapes, dtype_names, make, to_numpy):
    """make(float32 array, dtype name) -> kernel input; to_numpy(result) -> float64 array."""
    rng = np.random.default_rng()
    for n_rows, n_cols in shapes:
        for name in dtype_names:
            x = make((rng.standard_normal((n_rows, n_cols)) * 4).astype(np.float32), name)
            out = softmax(x, out=make(np.full((n_rows, n_cols), np.nan, np.float32), name))
            err = tessera.testing.relative_error(to_numpy(out), reference(to_numpy(x)))
            assert err < BOUNDS[name], f"{n_rows}x{n_cols} {name}: relative error {err}"
            print(f"{n_rows:>6} x {n_cols:<6} {name:<9} relative error {err:.1e}  ok")


def run_checks():
    if gpu_available():
        import torch

        def to_torch(x, name):
            return torch.from_numpy(x).to("cuda", getattr(torch, name))

        shapes = [(1823, 781), (4, 1), (3, 17), (1000, 100), (257, 1000), (64, 4097),
                  (16, 12345), (8, 32768), (4096, 4096)]
        check(shapes, ["float32", "float16", "bfloat16"], to_torch,
              lambda t: t.double().cpu().numpy())
    else:
        import ml_dtypes

        tessera.config.knobs.interpret = True
        print("no GPU: running through the interpreter")
        numpy_dtypes = {"float32": np.float32, "float16": np.float16,
                        "bfloat16": ml_dtypes.bfloat16}
        check([(5, 1), (37, 100), (3, 1000), (2, 3000)], ["float32", "float16", "bfloat16"],
              lambda x, name: x.astype(numpy_dtypes[name]), lambda x: x.astype(np.float64))


run_checks()

# %% [markdown]
# ## Every stage can be inspected
# The PTX of a 4096-column fp16 row: 16-byte loads, `ex2.approx.f32` for the exponential, and
# the warp shuffles and shared-memory exchange of the two row reductions.

# %%
x = np.zeros((8, 4096), np.float16)
ptx = softmax_kernel.asm(x, x, 4096, 4096, 8, 4096, **softmax_config(4096), arch="sm_90a")["ptx"]
for needle in ("ld.global.v4.b32", "ex2.approx.f32", "shfl.sync.bfly", "bar.sync"):
    print(f"{ptx.count(needle):>4} x {needle}")

# %% [markdown]
# ## Benchmark
# GB/s (one read and one write of the matrix) for 4096 rows of growing length, fp32, against
# `torch.softmax` and a device-to-device copy of the same bytes (the ceiling), measured in the
# same run: the median of the runs that fill 100 ms, the L2 cache flushed before each.

# %%
def benchmark(n_rows: int = 4096, col_sizes=(256, 1024, 2048, 4096, 8192, 16384, 32768),
              dtype_name: str = "float32"):
    import torch
    from tessera.testing import do_bench

    dtype = getattr(torch, dtype_name)
    rows = []
    for n_cols in col_sizes:
        x = torch.randn((n_rows, n_cols), device="cuda", dtype=dtype)
        out = torch.empty_like(x)
        nbytes = 2 * x.numel() * x.element_size()
        gbps = lambda ms: nbytes / ms / 1e6  # noqa: E731
        ours = gbps(do_bench(lambda: softmax(x, out), return_mode="median"))
        theirs = gbps(do_bench(lambda: torch.softmax(x, dim=1), return_mode="median"))
        copy = gbps(do_bench(lambda: out.copy_(x), return_mode="median"))
        rows.append((n_cols, ours, theirs, copy))
    print(f"{'columns':>8} {'tessera GB/s':>13} {'torch GB/s':>11} {'copy GB/s':>10} "
          f"{'vs copy':>8} {'vs torch':>9}")
    for n_cols, ours, theirs, copy in rows:
        print(f"{n_cols:>8} {ours:>13.0f} {theirs:>11.0f} {copy:>10.0f} {ours / copy:>8.1%} "
              f"{ours / theirs:>8.2f}x")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        plt.figure(figsize=(6, 4))
        for column, label in ((1, "tessera"), (2, "torch.softmax"), (3, "copy")):
            plt.plot([r[0] for r in rows], [r[column] for r in rows], marker="o", label=label)
        plt.xscale("log", base=2)
        plt.xlabel("columns (4096 rows)")
        plt.ylabel("GB/s")
        plt.legend()
        path = os.environ.get("TUTORIAL_PLOT", "fused-softmax.png")
        plt.savefig(path, dpi=100, bbox_inches="tight")
        print(f"plot: {path}")
    except ImportError:
        pass
    return rows


if gpu_available() and "--no-bench" not in sys.argv:
    benchmark()

# %% [markdown]
# ## In the library
# The same kernel and wrapper are `tessera.ops.softmax` (`from tessera.ops import softmax`),
# which the tests and `benchmarks/norms.py` use.
