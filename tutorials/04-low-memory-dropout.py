# %% [markdown]
# # Low-memory dropout
#
# Dropout zeroes each element of `x` with probability `p` and scales the survivors by
# 1 / (1 − p), so the expected value is unchanged. The classic implementation draws a random
# keep-mask, stores it (one byte or more per element) and reads it again in the backward pass.
# Here the mask is never stored: it is a pure function of a *seed* and the element's index,
# recomputed wherever it is needed. You will learn:
# - `tl.rand(seed, offsets)`: counter-based random numbers (Philox), the same for the same seed
#   and offsets in any kernel, any block size, any program order, and bit-identical to Triton's;
# - how the backward pass regenerates the forward's mask from the seed alone;
# - how the stream is defined (a NumPy model of it checks the kernel bit for bit);
# - what it costs against `torch.nn.functional.dropout`, which stores its mask.
#
# With a GPU the tutorial runs on it; without one it runs through the interpreter (exact, on
# the CPU), at small sizes.

# %%
import sys

import numpy as np

import tessera
import tessera.language as tl
from tessera.testing import gpu_available

# %% [markdown]
# ## The baseline: a stored mask
# The mask `keep` (int8, 1 = keep) comes from the host; the kernel only applies it. The backward
# pass would need the same tensor again, so it lives in memory from forward to backward.

# %%
@tessera.jit
def masked_dropout_kernel(x_ptr, keep_ptr, out_ptr, n, p, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    keep = tl.load(keep_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.where(keep != 0, x / (1 - p), 0.0), mask=mask)


# %% [markdown]
# ## Seeded dropout
# `tl.rand(seed, offs)` gives one float32 in [0, 1) per offset. An element is kept where it is
# above `p`. Nothing but the seed (an integer) is kept for the backward pass: the gradient of
# dropout is dropout of the gradient with the *same* mask, so the backward kernel is the same
# kernel called on `dy` with the same seed.

# %%
@tessera.jit
def seeded_dropout_kernel(x_ptr, out_ptr, n, p, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    keep = tl.rand(seed, offs) > p          # regenerated from (seed, offset), never stored
    tl.store(out_ptr + offs, tl.where(keep, x / (1 - p), 0.0), mask=mask)


def empty_like(x):
    return np.empty_like(x) if isinstance(x, np.ndarray) else x.new_empty(x.shape)


def seeded_dropout(x, p: float, seed: int, BLOCK: int = 1024):
    """Forward and backward alike: ``seeded_dropout(dy, p, seed)`` is the gradient of
    ``seeded_dropout(x, p, seed)``."""
    out = empty_like(x)
    n = x.numel() if hasattr(x, "numel") else x.size
    seeded_dropout_kernel[(tessera.cdiv(n, BLOCK),)](x, out, n, p, seed, BLOCK=BLOCK)
    return out


def masked_dropout(x, keep, p: float, BLOCK: int = 1024):
    out = empty_like(x)
    n = x.numel() if hasattr(x, "numel") else x.size
    masked_dropout_kernel[(tessera.cdiv(n, BLOCK),)](x, keep, out, n, p, BLOCK=BLOCK)
    return out


# %% [markdown]
# ## What `tl.rand` computes
# Philox-4x32-10 (Salmon et al., SC'11) scrambles a 128-bit counter with a 64-bit key in ten
# rounds of two 32×32→64-bit multiplications. Triton's stream, which Tessera follows bit for bit:
# the counter is (offset, 0, 0, 0) for 32-bit offsets, the key the seed's two 32-bit halves,
# and the first output word, read as a signed integer, folded onto [0, 2³¹) and scaled by
# 4.6566127342e-10, becomes the float. In NumPy:

# %%
def philox_rand(seed: int, offsets: np.ndarray) -> np.ndarray:
    mask32 = np.uint64(0xFFFFFFFF)
    c0 = offsets.astype(np.int64).astype(np.uint64) & mask32
    c1 = c2 = c3 = np.zeros_like(c0)
    k0, k1 = np.uint64(seed % 2**64 & 0xFFFFFFFF), np.uint64(seed % 2**64 >> 32)
    for _ in range(10):
        a, b = np.uint64(0xD2511F53) * c0, np.uint64(0xCD9E8D57) * c2  # exact in 64 bits
        c0, c1, c2, c3 = ((b >> np.uint64(32)) ^ c1 ^ k0, b & mask32,
                          (a >> np.uint64(32)) ^ c3 ^ k1, a & mask32)
        k0, k1 = (k0 + np.uint64(0x9E3779B9)) & mask32, (k1 + np.uint64(0xBB67AE85)) & mask32
    signed = c0.astype(np.uint32).view(np.int32).astype(np.int64)
    signed = np.where(signed < 0, -signed - 1, signed)
    return signed.astype(np.float32) * np.float32(4.6566127342e-10)


# %% [markdown]
# ## Correctness
# On fresh inputs of sizes that are not multiples of the block, with seeds of 32 and 64 bits:
# - the kernel keeps exactly the elements the NumPy model keeps, and scales them by 1 / (1 − p);
# - a different block size gives the same output (the numbers depend on offsets only);
# - the backward pass (the same kernel on `dy`) zeroes exactly where the forward did;
# - the kept fraction is close to 1 − p;
# - the baseline with the same mask, stored, gives the same output.

# %%
def check(sizes, make, to_numpy):
    rng = np.random.default_rng()
    for n in sizes:
        p = float(rng.uniform(0.1, 0.9))
        seed = int(rng.integers(-2**63, 2**63)) if n % 2 else int(rng.integers(0, 2**31))
        a = rng.standard_normal(n).astype(np.float32)
        out = to_numpy(seeded_dropout(make(a), p, seed))
        keep = philox_rand(seed, np.arange(n)) > np.float32(p)
        expected = np.where(keep, a.astype(np.float64) / (1 - np.float32(p)), 0.0)
        assert np.array_equal(out != 0, keep & (a != 0)), f"n={n}: mask differs from NumPy"
        # (all dropped: the reference is zero, and so must the output be)
        err = tessera.testing.relative_error(out, expected) if keep.any() else np.abs(out).max()
        assert err < 1e-6, f"n={n}: relative error {err}"
        assert np.array_equal(to_numpy(seeded_dropout(make(a), p, seed, BLOCK=256)), out)
        dy = rng.standard_normal(n).astype(np.float32)
        dx = to_numpy(seeded_dropout(make(dy), p, seed))
        assert np.array_equal(dx != 0, keep & (dy != 0)), f"n={n}: backward mask differs"
        kept = keep.mean()
        assert abs(kept - (1 - p)) < 5 * np.sqrt(p * (1 - p) / n) + 1e-3, (kept, 1 - p)
        baseline = to_numpy(masked_dropout(make(a), make(keep.astype(np.int8)), p))
        assert np.array_equal(baseline, out), f"n={n}: the stored-mask baseline differs"
        print(f"n={n:>9} p={p:.2f} seed={seed:>21}: kept {kept:.3f}, "
              f"relative error {err:.1e}  ok")


if gpu_available():
    import torch
    check([1, 17, 1000, 4097, 98433, 1 << 20 | 5],
          lambda a: torch.from_numpy(a).cuda(), lambda t: t.cpu().numpy())
else:
    tessera.config.knobs.interpret = True
    print("no GPU: running through the interpreter")
    check([1, 17, 1000, 3001], lambda a: a, lambda a: a)

# %% [markdown]
# ## Benchmark
# Forward and backward of dropout on float32 vectors: the seeded kernel (reads x, writes out;
# the backward regenerates the mask) against the stored-mask baseline (also reads and writes its
# mask) and `torch.nn.functional.dropout` with autograd (which stores a mask), measured in the
# same run. Memory kept between forward and backward: 8 bytes (the seed) against n bytes or more.

# %%
def benchmark(sizes, p: float = 0.5):
    import torch
    from tessera.testing import do_bench
    print(f"{'n':>10} {'seeded ms':>10} {'stored-mask ms':>15} {'torch ms':>9} "
          f"{'seeded GB/s':>12}")
    for n in sizes:
        x = torch.randn(n, device="cuda")
        keep = (torch.rand(n, device="cuda") > p).to(torch.int8)
        x_grad = x.clone().requires_grad_()
        dy = torch.randn(n, device="cuda")

        def torch_step():
            y = torch.nn.functional.dropout(x_grad, p, training=True)
            y.backward(dy)

        t_seeded = do_bench(lambda: (seeded_dropout(x, p, 123), seeded_dropout(dy, p, 123)),
                            return_mode="median", grad_to_none=None)
        t_masked = do_bench(lambda: (masked_dropout(x, keep, p), masked_dropout(dy, keep, p)),
                            return_mode="median")
        t_torch = do_bench(torch_step, return_mode="median", grad_to_none=[x_grad])
        gbps = 2 * 8 * n / t_seeded / 1e6  # two passes, each reads and writes 4 bytes/element
        print(f"{n:>10} {t_seeded:>10.3f} {t_masked:>15.3f} {t_torch:>9.3f} {gbps:>12.1f}")


if gpu_available() and "--no-bench" not in sys.argv:
    benchmark([2 ** k for k in range(16, 29, 3)])
