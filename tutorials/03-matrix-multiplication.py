# %% [markdown]
# # Matrix multiplication
#
# A matrix product on the tensor cores, with a fused epilogue. You will learn:
# - `tl.dot`: a tile-level matrix product that Tessera runs on the tensor cores: `wgmma` on
#   Hopper (sm_90a; a warpgroup of 4 warps reads both operands from swizzled shared memory
#   through matrix descriptors), `mma.sync` elsewhere (fragments read with `ldmatrix`);
# - software pipelining: with `num_stages=S` the loads of the next S-1 iterations of the K loop
#   are in flight (`cp.async`) while the tensor cores work on this one;
# - grouped program ordering (`GROUP_SIZE_M`), which makes neighbouring programs share rows
#   of A and columns of B in the L2 cache;
# - masks for sizes that are not multiples of the blocks, and a fused epilogue (bias +
#   leaky ReLU) applied to the accumulator before it is stored;
# - how to check the PTX for `wgmma`, `ldmatrix`, `mma.sync` and `cp.async`, and to benchmark
#   against `torch.matmul` (cuBLAS) at 4096³ and 8192³ in fp16 and bf16.
#
# With a GPU the tutorial runs on it; without one it runs through the interpreter (exact, on
# the CPU) at small sizes.

# %%
import os
import sys

import numpy as np
import tessera
import tessera.language as tl
from tessera.testing import gpu_available

# %% [markdown]
# ## The kernel
# Each program computes a `BLOCK_M x BLOCK_N` tile of `C = act(A @ B + bias)`. It walks K in
# steps of `BLOCK_K`, accumulating in float32; `a_ptrs` and `b_ptrs` advance by one block of K
# each step. Rows and columns past M and N wrap around (`% M`): they compute garbage that the
# final masked store drops, and the loads need no M/N masks. The K tail is masked with zeros,
# which add nothing to the products.
#
# Programs are numbered in groups of `GROUP_SIZE_M` rows of tiles: consecutive programs then
# walk down a column of tiles instead of along a row, and reuse the same columns of B.

# %%
@tessera.jit
def leaky_relu(x):
    return tl.where(x >= 0, x, 0.01 * x)


@tessera.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, bias_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_SIZE_M: tl.constexpr, HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    # The fused epilogue, in float32 on the accumulator's registers.
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    if HAS_BIAS:
        bias = tl.load(bias_ptr + offs_cn, mask=offs_cn < N, other=0.0)
        accumulator = accumulator + bias.to(tl.float32)[None, :]
    if ACTIVATION == "leaky_relu":
        accumulator = leaky_relu(accumulator)
    c = accumulator.to(c_ptr.dtype.element_ty)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


# %% [markdown]
# ## The host wrapper
# One program per output tile. `tessera.autotune` picks, per (M, N, K), the fastest of a few
# tile shapes on the GPU (each is compiled with zero register spills for sm_80 and sm_90a);
# the interpreter takes the first. `num_stages` sets how deep the cp.async rings are.

# %%
CONFIGS = [
    tessera.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_SIZE_M": 8},
                   num_warps=4, num_stages=3),
    tessera.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_SIZE_M": 8},
                   num_warps=4, num_stages=4),
    tessera.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 32, "GROUP_SIZE_M": 8},
                   num_warps=8, num_stages=3),
    tessera.Config({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_SIZE_M": 8},
                   num_warps=8, num_stages=3),
    tessera.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8},
                   num_warps=8, num_stages=3),
    tessera.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_SIZE_M": 8},
                   num_warps=4, num_stages=4),
    # wgmma's (sm_90a) best: one warpgroup on 128 x 128 with K steps of 64, 3 stages (96 KiB,
    # two CTAs per SM), and two warpgroups on 256 x 128.
    tessera.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8},
                   num_warps=4, num_stages=3),
    tessera.Config({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8},
                   num_warps=8, num_stages=3),
    tessera.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_SIZE_M": 8},
                   num_warps=4, num_stages=4),
]

tuned_matmul_kernel = tessera.autotune(configs=CONFIGS, key=["M", "N", "K"])(matmul_kernel)


def matmul(a, b, bias=None, activation: str = "", out=None):
    """C = activation(a @ b + bias) for 2-D a [M, K] and b [K, N] (fp16 or bf16); C has a's
    dtype. Works on torch tensors (GPU) and NumPy arrays (interpreter)."""
    M, K = a.shape
    K2, N = b.shape
    assert K == K2, f"inner dimensions differ: {a.shape} @ {b.shape}"
    if out is None:
        out = np.empty((M, N), a.dtype) if isinstance(a, np.ndarray) else a.new_empty((M, N))
    grid = lambda meta: (tessera.cdiv(M, meta["BLOCK_M"]) * tessera.cdiv(N, meta["BLOCK_N"]),)
    tuned_matmul_kernel[grid](
        a, b, out, out if bias is None else bias, M, N, K,
        a.strides[0] // a.itemsize if isinstance(a, np.ndarray) else a.stride(0),
        a.strides[1] // a.itemsize if isinstance(a, np.ndarray) else a.stride(1),
        b.strides[0] // b.itemsize if isinstance(b, np.ndarray) else b.stride(0),
        b.strides[1] // b.itemsize if isinstance(b, np.ndarray) else b.stride(1),
        out.strides[0] // out.itemsize if isinstance(out, np.ndarray) else out.stride(0),
        out.strides[1] // out.itemsize if isinstance(out, np.ndarray) else out.stride(1),
        HAS_BIAS=bias is not None, ACTIVATION=activation)
    return out


# %% [markdown]
# ## Correctness
# Fresh random inputs; shapes that are not multiples of the blocks; with and without the
# epilogue; fp16 and bf16; against a float64 reference. The output is poisoned (NaN) first,
# so an element the kernel forgot to write fails the check. Bounds (docs/benchmarks.md): relative
# error ‖out − ref‖ / ‖ref‖ ≤ 5e-3 for fp16 and ≤ 1e-2 for bf16 (the output's own rounding).

# %%
def reference(a, b, bias, activation):
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if bias is not None:
        ref += bias.astype(np.float64)[None, :]
    if activation == "leaky_relu":
        ref = np.where(ref >= 0, ref, 0.01 * ref)
    return ref


def check(shapes, dtypes, make, to_numpy):
    rng = np.random.default_rng()
    for (M, N, K) in shapes:
        for dtype_name in dtypes:
            for activation, with_bias in (("", False), ("leaky_relu", True)):
                a = rng.standard_normal((M, K)).astype(np.float32)
                b = rng.standard_normal((K, N)).astype(np.float32)
                bias = rng.standard_normal(N).astype(np.float32) if with_bias else None
                ta, tb = make(a, dtype_name), make(b, dtype_name)
                tbias = make(bias, dtype_name) if with_bias else None
                out = make(np.full((M, N), np.nan, np.float32), dtype_name)
                matmul(ta, tb, tbias, activation, out)
                ref = reference(to_numpy(ta), to_numpy(tb),
                                None if tbias is None else to_numpy(tbias), activation)
                err = tessera.testing.relative_error(to_numpy(out), ref)
                bound = 5e-3 if dtype_name == "float16" else 1e-2
                assert err < bound, f"{M}x{N}x{K} {dtype_name} {activation}: error {err}"
                print(f"{M:>5}x{N:<5}x{K:<5} {dtype_name:<9} {activation or 'plain':<10} "
                      f"relative error {err:.2e}  ok")


if gpu_available():
    import torch

    def to_torch(x, dtype_name):
        return torch.from_numpy(x).to("cuda", getattr(torch, dtype_name))

    check([(512, 512, 512), (1000, 520, 333), (129, 65, 17), (4096, 4096, 4096)],
          ["float16", "bfloat16"], to_torch, lambda t: t.float().cpu().numpy())
else:
    import ml_dtypes

    tessera.config.knobs.interpret = True
    print("no GPU: running through the interpreter")

    def to_numpy_dtype(x, dtype_name):
        return x.astype(np.float16 if dtype_name == "float16" else ml_dtypes.bfloat16)

    check([(64, 64, 64), (100, 72, 40)], ["float16", "bfloat16"], to_numpy_dtype,
          lambda x: x.astype(np.float32))

# %% [markdown]
# ## The instructions
# `asm` compiles for given arguments without a GPU. The PTX shows the tensor-core path: 16-byte
# `cp.async` copies into the rings, `ldmatrix` reading the fragments (`.trans` for B, whose
# rows are N-contiguous), `mma.sync.aligned.m16n8k16` and the `cp.async.wait_group` of a
# 3-stage pipeline (at most 1 group left in flight).

# %%
x = np.zeros((256, 256), np.float16)
stages = matmul_kernel.asm(x, x, x, x, 256, 256, 256, 256, 1, 256, 1, 256, 1,
                           BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, GROUP_SIZE_M=8, HAS_BIAS=False,
                           ACTIVATION="", num_warps=4, num_stages=3, arch="sm_80")
ptx = stages["ptx"]
for needle in ("cp.async.cg.shared.global", "ldmatrix.sync.aligned.m8n8.x4",
               "mma.sync.aligned.m16n8k16", "cp.async.wait_group 1"):
    lines = [" ".join(line.split()) for line in ptx.splitlines()]
    lines = [line for line in lines if needle in line]
    assert lines, f"{needle} not found in the PTX"
    print(f"{len(lines):>4} x {lines[0]}")

# %% [markdown]
# For sm_90a the same kernel becomes `wgmma`: per warpgroup and K step of 16, one
# `wgmma.mma_async ... m64n128k16` per 64 rows of the tile, reading A and B straight from the
# cp.async rings (64-bit matrix descriptors, no `ldmatrix`), then `wgmma.wait_group`.
# (`tessera.config.knobs.wgmma = False`, or TESSERA_WGMMA=0, keeps mma.sync on sm_90a too.)

# %%
stages = matmul_kernel.asm(x, x, x, x, 256, 256, 256, 256, 1, 256, 1, 256, 1,
                           BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_SIZE_M=8, HAS_BIAS=False,
                           ACTIVATION="", num_warps=4, num_stages=3, arch="sm_90a")
ptx = stages["ptx"]
for needle in ("wgmma.mma_async.sync.aligned.m64n128k16", "wgmma.wait_group.sync.aligned 0",
               "cp.async.wait_group 1"):
    lines = [" ".join(line.split()) for line in ptx.splitlines()]
    lines = [line for line in lines if needle in line]
    assert lines, f"{needle} not found in the PTX"
    print(f"{len(lines):>4} x {lines[0][:110]}")
assert "ldmatrix" not in ptx

# %% [markdown]
# ## Benchmark
# TFLOP/s (2·M·N·K per product) of Tessera and `torch.matmul` (cuBLAS) in the same run, at
# 4096³ and 8192³, fp16 and bf16: the median of the runs that fill 100 ms, with the L2 cache
# flushed before each, after a warm-up that compiles and tunes.

# %%
def measure(n: int, dtype_name: str):
    """(tessera TFLOP/s, cuBLAS TFLOP/s, relative error) of an n³ product."""
    import torch
    from tessera.testing import do_bench
    dtype = getattr(torch, dtype_name)
    a = torch.randn((n, n), device="cuda", dtype=dtype)
    b = torch.randn((n, n), device="cuda", dtype=dtype)
    out = torch.full((n, n), float("nan"), device="cuda", dtype=dtype)
    matmul(a, b, out=out)  # compiles and tunes, outside the timing
    err = tessera.testing.relative_error(out.float().cpu().numpy(),
                                         (a.double() @ b.double()).cpu().numpy())
    t_tessera = do_bench(lambda: matmul(a, b, out=out), return_mode="median")
    t_torch = do_bench(lambda: torch.matmul(a, b, out=out), return_mode="median")
    return 2 * n ** 3 / t_tessera / 1e9, 2 * n ** 3 / t_torch / 1e9, err


def benchmark(sizes=(4096, 8192), dtype_names=("float16", "bfloat16")):
    rows = [(dtype_name, n, *measure(n, dtype_name))
            for dtype_name in dtype_names for n in sizes]
    print(f"{'dtype':<9} {'size':>6} {'tessera TFLOP/s':>16} {'cuBLAS TFLOP/s':>15} "
          f"{'ratio':>6} {'rel err':>8}")
    for dtype_name, n, ours, theirs, err in rows:
        print(f"{dtype_name:<9} {n:>6} {ours:>16.1f} {theirs:>15.1f} {ours / theirs:>6.1%} "
              f"{err:>8.1e}")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        plt.figure(figsize=(6, 4))
        labels = [f"{d}\n{n}³" for d, n, *_ in rows]
        positions = np.arange(len(rows))
        plt.bar(positions - 0.2, [r[2] for r in rows], 0.4, label="tessera")
        plt.bar(positions + 0.2, [r[3] for r in rows], 0.4, label="torch.matmul (cuBLAS)")
        plt.xticks(positions, labels)
        plt.ylabel("TFLOP/s")
        plt.legend()
        path = os.environ.get("TUTORIAL_PLOT", "matrix-multiplication.png")
        plt.savefig(path, dpi=100, bbox_inches="tight")
        print(f"plot: {path}")
    except ImportError:
        pass
    return rows


if gpu_available() and "--no-bench" not in sys.argv:
    benchmark()

# %% [markdown]
# ## In the library
# The same kernel, configs and wrapper are `tessera.ops.matmul` (`from tessera.ops import
# matmul`), which the tests and `benchmarks/matmul.py` use. On Hopper (sm_90a) the library's
# autotuner also times a second kernel family beside these configs: a persistent kernel
# (one program per SM looping over the tiles) reading A and B through device-side tensor
# descriptors, so the TMA copies the tiles and the rings stay filled across tiles
# (`tessera/ops/gemm_tma.py`, docs/perf/matmul_ops_tma.md); for inputs it cannot take
# (another arch, fp32, unaligned rows) the library runs exactly this kernel.
