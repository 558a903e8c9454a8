# %% [markdown]
# # Vector addition
#
# The first Tessera kernel, end to end. You will learn:
# - how a kernel is written: one *program* handles one block of `BLOCK` elements;
# - how masks guard the last, partial block (sizes that are not multiples of the block);
# - how to launch a kernel on framework tensors with `kernel[grid](...)`;
# - how to look at every compilation stage (`kernel.asm(...)`);
# - how to benchmark against `torch.add` and the GPU's copy bandwidth.
#
# With a GPU the tutorial runs on it; without one it runs through the interpreter (exact, on
# the CPU), at small sizes.

# %%
import os
import sys

import numpy as np

import tessera
import tessera.language as tl
from tessera.testing import gpu_available


@tessera.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)                      # which block this program handles
    offs = pid * BLOCK + tl.arange(0, BLOCK)    # the element indices of that block
    mask = offs < n                             # the last block may be partial
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


# %% [markdown]
# The host wrapper allocates the output and picks the grid: one program per block. The grid may
# be a callable of the launch's arguments, so it follows `BLOCK`.

# %%
def add(x, y, out=None, BLOCK: int = 1024):
    if out is None:
        out = np.empty_like(x) if isinstance(x, np.ndarray) else x.new_empty(x.shape)
    n = x.shape[0]
    add_kernel[lambda args: (tessera.cdiv(n, args["BLOCK"]),)](x, y, out, n, BLOCK=BLOCK)
    return out


# %% [markdown]
# ## Correctness
# Fresh random inputs, sizes that are not multiples of the block, against a float64 reference.
# The output is poisoned (NaN) first, so an element the kernel forgot to write fails the check.

# %%
def check(sizes, make, to_numpy):
    rng = np.random.default_rng()
    for n in sizes:
        a = rng.standard_normal(n).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        x, y = make(a), make(b)
        out = make(np.full(n, np.nan, dtype=np.float32))
        add(x, y, out)
        err = tessera.testing.relative_error(to_numpy(out), a.astype(np.float64) + b)
        assert err < 1e-6, f"n={n}: relative error {err}"
        print(f"n={n:>9}: relative error {err:.2e}  ok")


if gpu_available():
    import torch
    check([1, 17, 1000, 4096, 98432, 1 << 20 | 3],
          lambda a: torch.from_numpy(a).cuda(), lambda t: t.cpu().numpy())
else:
    tessera.config.knobs.interpret = True
    print("no GPU: running through the interpreter")
    check([1, 17, 1000, 4099], lambda a: a, lambda a: a)

# %% [markdown]
# ## Every stage can be inspected
# `asm` compiles for the given arguments (no GPU needed) and returns each stage's text:
# the tile IR, the IR with layouts, LLVM IR, PTX. With 16-byte-aligned pointers and `n`
# divisible by 16, the loads are 128-bit vector loads (`ld.global.v4`).

# %%
x = np.zeros(4096, dtype=np.float32)
stages = add_kernel.asm(x, x, x, 4096, BLOCK=1024, arch="sm_90a")
print(stages["tgir"])
print("\n".join(l for l in stages["ptx"].splitlines() if "ld.global" in l or "st.global" in l))

# %% [markdown]
# ## Benchmark
# Bandwidth of `out = x + y` (3 × 4 bytes per element) for growing sizes, against `torch.add`
# and a device-to-device copy (the ceiling), measured in the same run: the median of the runs
# that fill 100 ms, with the L2 cache flushed before each.

# %%
def benchmark(sizes):
    import torch
    from tessera.testing import do_bench
    rows = []
    for n in sizes:
        x = torch.randn(n, device="cuda")
        y = torch.randn(n, device="cuda")
        out = torch.empty_like(x)
        gbps = lambda ms, nbytes: nbytes / ms / 1e6
        t_tessera = do_bench(lambda: add(x, y, out), return_mode="median")
        t_torch = do_bench(lambda: torch.add(x, y, out=out), return_mode="median")
        src = torch.randn(n * 2, device="cuda")
        dst = torch.empty_like(src)
        # The copy reads and writes 8n bytes: 16n in total.
        t_copy = do_bench(lambda: dst.copy_(src), return_mode="median")
        rows.append((n, gbps(t_tessera, 12 * n), gbps(t_torch, 12 * n), gbps(t_copy, 16 * n)))
    print(f"{'n':>12} {'tessera GB/s':>13} {'torch GB/s':>11} {'copy GB/s':>10} {'vs copy':>8}")
    for n, a, b, c in rows:
        print(f"{n:>12} {a:>13.1f} {b:>11.1f} {c:>10.1f} {a / c:>8.1%}")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        plt.figure(figsize=(6, 4))
        for col, label in ((1, "tessera"), (2, "torch.add"), (3, "copy")):
            plt.plot([r[0] for r in rows], [r[col] for r in rows], marker="o", label=label)
        plt.xscale("log", base=2)
        plt.xlabel("elements")
        plt.ylabel("GB/s")
        plt.legend()
        path = os.environ.get("TUTORIAL_PLOT", "vector-add.png")
        plt.savefig(path, dpi=100)
        print(f"plot: {path}")
    except ImportError:
        pass
    return rows


if gpu_available() and "--no-bench" not in sys.argv:
    benchmark([2 ** k for k in range(12, 29, 2)])
