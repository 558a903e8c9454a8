# %% [markdown]
# # Fused attention (FlashAttention-2 forward)
#
# `O = softmax(Q Kᵀ · sm_scale) V` for (batch, heads, sequence, head dim) tensors, without ever
# writing the S x S score matrix to memory. You will learn:
# - chained `tl.dot`s: the scores `Q Kᵀ` stay in registers, are turned into probabilities `P`
#   and, cast to 16 bits, feed the second product `P V` directly;
# - the online softmax: one pass over the keys keeps a running row maximum `m` and a running
#   row sum `l`, and rescales the accumulator whenever the maximum grows;
# - `exp2` with the scale folded in (`qk_scale = sm_scale · log2(e)`): one multiply and one
#   `ex2.approx` per score;
# - causal masking (`tl.where` on the diagonal block, and a loop that stops at the diagonal)
#   and sequence lengths that are not multiples of the block (masked loads, `-inf` scores);
# - saving the log-sum-exp of every row, which the backward pass needs to rebuild `P`.
#
# With a GPU the tutorial runs on it; without one it runs through the interpreter (exact, on
# the CPU) at small sizes.

# %%
import os
import sys

import numpy as np
import tessera
import tessera.language as tl

LOG2E = 1.4426950408889634  # log2(e): exp(x) = exp2(x · log2(e))

# %% [markdown]
# ## The kernel
# One program per (`BLOCK_M` query rows, batch x head). It loads its block of Q once, then walks
# the keys and values in blocks of `BLOCK_N`. For each key block it computes the scores
# `qk = Q Kᵀ · qk_scale` (in base 2), then
#
#     m_new = max(m, rowmax(qk));  alpha = 2^(m - m_new);  p = 2^(qk - m_new)
#     l = l · alpha + rowsum(p);   acc = acc · alpha + p V;  m = m_new
#
# and at the end `O = acc / l`. All of the softmax runs in float32; only `p` is rounded to the
# input dtype for the tensor cores. Out-of-range keys (past S) get a score of `-inf`, so
# `p = 0` for them; their K and V rows are loaded as zeros (`other=0`) so no NaN or garbage
# reaches the products. Out-of-range query rows compute harmless values that the masked store
# drops. With `CAUSAL`, query `i` sees keys `j <= i`: the loop stops after the block holding the
# diagonal, and the `tl.where` masks the part of the last blocks above it. A row always sees at
# least key 0 (or, non-causal, every key), so `m` is finite after the first block and `l >= 1`.
#
# The log-sum-exp saved per row is in **base 2** of the scaled scores:
# `lse2 = m + log2(l) = log2(Σ_j 2^(qk_j))`, with `qk_j = q·k_j · sm_scale · log2(e)`; the
# natural-log value is `lse = lse2 / log2(e) = ln(Σ_j exp(q·k_j · sm_scale))`. The backward
# rebuilds `P = 2^(qk - lse2)` from it with one `exp2`.

# %%
@tessera.jit
def attention_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, qk_scale, H, S,
                         stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks,
                         stride_vb, stride_vh, stride_vs, stride_ob, stride_oh, stride_os,
                         D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         CAUSAL: tl.constexpr):
    start_m = tl.program_id(axis=0)
    off_bh = tl.program_id(axis=1)
    off_b = off_bh // H
    off_h = off_bh % H
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)  # the head dim is contiguous (stride 1)
    q_ptrs = (q_ptr + off_b * stride_qb + off_h * stride_qh
              + offs_m[:, None] * stride_qs + offs_d[None, :])
    k_ptrs = (k_ptr + off_b * stride_kb + off_h * stride_kh
              + offs_n[:, None] * stride_ks + offs_d[None, :])
    v_ptrs = (v_ptr + off_b * stride_vb + off_h * stride_vh
              + offs_n[:, None] * stride_vs + offs_d[None, :])
    q = tl.load(q_ptrs, mask=offs_m[:, None] < S, other=0.0)

    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, D), dtype=tl.float32)
    if CAUSAL:
        hi = tl.minimum((start_m + 1) * BLOCK_M, S)  # stop after the diagonal block
    else:
        hi = S
    for start_n in range(0, hi, BLOCK_N):
        in_range = start_n + offs_n < S
        k = tl.load(k_ptrs, mask=in_range[:, None], other=0.0)
        v = tl.load(v_ptrs, mask=in_range[:, None], other=0.0)
        qk = tl.dot(q, tl.trans(k)) * qk_scale
        keep = in_range[None, :]
        if CAUSAL:
            keep = keep & (start_n + offs_n[None, :] <= offs_m[:, None])
        qk = tl.where(keep, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = tl.dot(p.to(q_ptr.dtype.element_ty), v, acc * alpha[:, None])
        m_i = m_new
        k_ptrs += BLOCK_N * stride_ks
        v_ptrs += BLOCK_N * stride_vs

    acc = acc / l_i[:, None]
    o_ptrs = (o_ptr + off_b * stride_ob + off_h * stride_oh
              + offs_m[:, None] * stride_os + offs_d[None, :])
    tl.store(o_ptrs, acc.to(o_ptr.dtype.element_ty), mask=offs_m[:, None] < S)
    tl.store(lse_ptr + off_bh * S + offs_m, m_i + tl.log2(l_i), mask=offs_m < S)


# %% [markdown]
# ## The host wrapper
# `attention_forward(q, k, v, causal, sm_scale)` takes (B, H, S, D) tensors whose last dim is
# contiguous: torch CUDA tensors on the GPU, NumPy arrays on the interpreter. It returns `O`
# (input dtype) and the base-2 log-sum-exp `lse2` as float32 (B, H, S). Tiles per head dim:
# the register file holds Q (BLOCK_M x D), the accumulator (BLOCK_M x D, fp32) and the scores
# (BLOCK_M x BLOCK_N, fp32), so the larger D, the smaller BLOCK_N. Every config compiles for
# sm_80 and sm_90a with zero register spills (tests/python/compiler/test_attention_ptx.py).

# %%
CONFIGS = {  # D -> (BLOCK_M, BLOCK_N, num_warps, num_stages)
    16: (64, 64, 4, 2),
    32: (64, 64, 4, 2),
    64: (64, 64, 4, 2),
    128: (64, 32, 8, 2),
}


def _strides(x) -> tuple:
    if isinstance(x, np.ndarray):
        return tuple(s // x.itemsize for s in x.strides)
    return tuple(x.stride())


def attention_forward(q, k, v, causal: bool = False, sm_scale: float | None = None,
                      out=None, lse=None):
    """(O, lse2) of softmax(q kᵀ · sm_scale) v for (B, H, S, D) q, k, v (fp16 or bf16, last
    dim contiguous); lse2[b, h, i] = log2 Σ_j 2^(q_i·k_j · sm_scale · log2 e), float32."""
    B, H, S, D = q.shape
    assert k.shape == q.shape and v.shape == q.shape, (q.shape, k.shape, v.shape)
    assert D in CONFIGS, f"head dim {D} not supported (one of {sorted(CONFIGS)})"
    if sm_scale is None:
        sm_scale = D ** -0.5
    numpy = isinstance(q, np.ndarray)
    if out is None:
        out = np.empty_like(q) if numpy else q.new_empty(q.shape)
    if lse is None and numpy:
        lse = np.empty((B, H, S), np.float32)
    elif lse is None:
        import torch
        lse = torch.empty((B, H, S), device=q.device, dtype=torch.float32)
    for x in (q, k, v, out):
        assert _strides(x)[3] == 1, "the head dim must be contiguous"
    assert _strides(lse) == (H * S, S, 1), "lse must be contiguous"
    block_m, block_n, num_warps, num_stages = CONFIGS[D]
    grid = (tessera.cdiv(S, block_m), B * H)
    attention_fwd_kernel[grid](
        q, k, v, out, lse, sm_scale * LOG2E, H, S,
        *_strides(q)[:3], *_strides(k)[:3], *_strides(v)[:3], *_strides(out)[:3],
        D=D, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal,
        num_warps=num_warps, num_stages=num_stages)
    return out, lse


def gpu_available() -> bool:
    try:
        import torch
        return torch.cuda.is_available() and not tessera.config.knobs.interpret
    except ImportError:
        return False


# %% [markdown]
# ## Correctness
# Fresh random inputs, poisoned (NaN) outputs, against a float64 reference computed the
# textbook way (the full score matrix, a max-subtracted softmax). Sequence lengths 1, 17 and
# 1000 are not multiples of any block. Bounds (BENCHMARKS.md): ‖O − ref‖ / ‖ref‖ ≤ 5e-3 for
# fp16 and ≤ 1e-2 for bf16; the log-sum-exp (float32) to 1e-3.

# %%
def reference(q, k, v, causal: bool, sm_scale: float):
    """(O, lse2) in float64 for float64 (B, H, S, D) arrays."""
    scores = np.einsum("bhid,bhjd->bhij", q, k) * sm_scale
    if causal:
        S = q.shape[2]
        scores = np.where(np.tril(np.ones((S, S), bool)), scores, -np.inf)
    m = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - m)
    l = e.sum(axis=-1, keepdims=True)
    o = np.einsum("bhij,bhjd->bhid", e / l, v)
    return o, (m + np.log(l))[..., 0] * LOG2E


def check_case(B, H, S, D, causal, dtype_name, make, to_numpy, rng):
    q, k, v = (make(rng.standard_normal((B, H, S, D)).astype(np.float32), dtype_name)
               for _ in range(3))
    out = make(np.full((B, H, S, D), np.nan, np.float32), dtype_name)
    lse = make(np.full((B, H, S), np.nan, np.float32), "float32")
    sm_scale = D ** -0.5
    attention_forward(q, k, v, causal, sm_scale, out=out, lse=lse)
    ref_o, ref_lse = reference(*(to_numpy(x).astype(np.float64) for x in (q, k, v)),
                               causal, sm_scale)
    err = tessera.testing.relative_error(to_numpy(out), ref_o)
    lse_err = tessera.testing.relative_error(to_numpy(lse), ref_lse)
    bound = 5e-3 if dtype_name == "float16" else 1e-2
    label = f"B={B} H={H} S={S:<5} D={D:<3} {'causal' if causal else 'full':<6} {dtype_name:<8}"
    assert err <= bound, f"{label}: O error {err}"
    assert lse_err <= 1e-3, f"{label}: lse error {lse_err}"
    print(f"{label} O error {err:.2e}  lse error {lse_err:.2e}  ok")
    return err, lse_err


def check(cases, dtypes, make, to_numpy):
    rng = np.random.default_rng()
    for B, H, S, D in cases:
        for causal in (False, True):
            for dtype_name in dtypes:
                check_case(B, H, S, D, causal, dtype_name, make, to_numpy, rng)


if gpu_available():
    import torch

    def to_torch(x, dtype_name):
        return torch.from_numpy(x).to("cuda", getattr(torch, dtype_name))

    check([(2, 3, S, D) for S in (1, 17, 128, 1000) for D in (16, 32, 64, 128)]
          + [(1, 2, 4096, D) for D in (64, 128)],
          ["float16", "bfloat16"], to_torch, lambda t: t.float().cpu().numpy())
else:
    import ml_dtypes

    tessera.config.knobs.interpret = True
    print("no GPU: running through the interpreter")

    def to_numpy_dtype(x, dtype_name):
        return x.astype({"float16": np.float16, "bfloat16": ml_dtypes.bfloat16,
                         "float32": np.float32}[dtype_name])

    check([(1, 2, 1, 16), (2, 1, 17, 32), (1, 2, 128, 64), (1, 1, 1000, 128)],
          ["float16", "bfloat16"], to_numpy_dtype, lambda x: x.astype(np.float32))

# %% [markdown]
# ## The instructions
# `asm` compiles for given arguments without a GPU. Both products run on the tensor cores
# (`mma.sync.aligned.m16n8k16`), the exponentials are single `ex2.approx` instructions, and
# the scores never touch shared memory: `P` goes from the first product's accumulator
# registers to the second product's A fragments.

# %%
x = np.zeros((1, 2, 256, 64), np.float16)
lse = np.zeros((1, 2, 256), np.float32)
st = tuple(s // 2 for s in x.strides[:3])
stages = attention_fwd_kernel.asm(x, x, x, x, lse, 0.125 * LOG2E, 2, 256, *st, *st, *st, *st,
                                  D=64, BLOCK_M=64, BLOCK_N=64, CAUSAL=True, num_warps=4,
                                  num_stages=2, arch="sm_80")
ptx = stages["ptx"]
for needle in ("mma.sync.aligned.m16n8k16", "ex2.approx", "ldmatrix.sync.aligned"):
    lines = [" ".join(line.split()) for line in ptx.splitlines() if needle in line]
    assert lines, f"{needle} not found in the PTX"
    print(f"{len(lines):>4} x {lines[0]}")

# %% [markdown]
# ## Benchmark
# TFLOP/s (4·B·H·S²·D forward, halved when causal) at B·S = 16384 tokens and H = 2048 / D
# (BENCHMARKS.md), against PyTorch's `scaled_dot_product_attention` with the flash backend
# (FlashAttention-2) and, where available, the cuDNN backend, in the same run.

# %%
def measure(S: int, D: int, causal: bool, dtype_name: str) -> dict:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from tessera.testing import do_bench
    B, H = 16384 // S, 2048 // D
    dtype = getattr(torch, dtype_name)
    q, k, v = (torch.randn((B, H, S, D), device="cuda", dtype=dtype) for _ in range(3))
    out = torch.full_like(q, float("nan"))
    lse = torch.empty((B, H, S), device="cuda", dtype=torch.float32)
    attention_forward(q, k, v, causal, out=out, lse=lse)  # compiles, outside the timing
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    err = tessera.testing.relative_error(out.float().cpu().numpy(), ref.cpu().numpy())
    flops = 4 * B * H * S * S * D / (2 if causal else 1)
    row = {"S": S, "D": D, "causal": causal, "dtype": dtype_name, "error": err}
    row["tessera"] = flops / do_bench(lambda: attention_forward(q, k, v, causal, out=out,
                                                                lse=lse)) / 1e9
    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION),
                          ("cudnn", getattr(SDPBackend, "CUDNN_ATTENTION", None))):
        if backend is None:
            row[name] = float("nan")
            continue
        try:
            with sdpa_kernel(backend):
                fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                fn()
                row[name] = flops / do_bench(fn) / 1e9
        except RuntimeError:
            row[name] = float("nan")
    return row


def benchmark(seqs=(1024, 4096), dims=(64, 128), dtype_names=("float16", "bfloat16")):
    rows = [measure(S, D, causal, dtype_name) for dtype_name in dtype_names
            for D in dims for S in seqs for causal in (False, True)]
    print(f"{'dtype':<9} {'S':>5} {'D':>4} {'causal':>6} {'tessera':>8} {'flash':>7} "
          f"{'cudnn':>7} {'/flash':>7} {'/cudnn':>7} {'rel err':>8}   (TFLOP/s)")
    for r in rows:
        print(f"{r['dtype']:<9} {r['S']:>5} {r['D']:>4} {str(r['causal']):>6} "
              f"{r['tessera']:>8.1f} {r['flash']:>7.1f} {r['cudnn']:>7.1f} "
              f"{r['tessera'] / r['flash']:>7.1%} {r['tessera'] / r['cudnn']:>7.1%} "
              f"{r['error']:>8.1e}")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        plt.figure(figsize=(8, 4))
        positions = np.arange(len(rows))
        for i, name in enumerate(("tessera", "flash", "cudnn")):
            plt.bar(positions + (i - 1) * 0.27, [r[name] for r in rows], 0.27, label=name)
        plt.xticks(positions, [f"{r['dtype'][:4]}\nS={r['S']}\nD={r['D']}"
                               f"{' c' if r['causal'] else ''}" for r in rows], fontsize=6)
        plt.ylabel("TFLOP/s (forward)")
        plt.legend()
        path = os.environ.get("TUTORIAL_PLOT", "fused-attention.png")
        plt.savefig(path, dpi=100, bbox_inches="tight")
        print(f"plot: {path}")
    except ImportError:
        pass
    return rows


if gpu_available() and "--no-bench" not in sys.argv:
    benchmark()
