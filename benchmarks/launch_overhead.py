"""Host launch overhead: seconds of host time per launch of a tiny kernel, Tessera vs Triton.

Method (shared/BENCHMARKS.md): best of 3 rounds of 20000 launches each, with 3 and with 16
tensor arguments, measured in the same process; the GPU work is negligible, so the number is
the host cost of binding, specializing, packing and cuLaunchKernel.
"""
from __future__ import annotations

import argparse
import json
import time

import torch

import tessera
import tessera.language as tl


@tessera.jit
def tiny3(a, b, c, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(c + offs, tl.load(a + offs) + tl.load(b + offs))


@tessera.jit
def tiny16(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, out,
           BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(a0 + offs) + tl.load(a14 + offs))


def time_launches(launch, n=20000, rounds=3) -> float:
    launch()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            launch()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        best = min(best, (t1 - t0) / n)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    ts = [torch.randn(128, device="cuda") for _ in range(16)]
    results = {}
    results["tessera_3"] = time_launches(lambda: tiny3[(1,)](ts[0], ts[1], ts[2], BLOCK=128))
    results["tessera_16"] = time_launches(lambda: tiny16[(1,)](*ts, BLOCK=128))
    try:
        import triton
        import triton.language as ttl

        @triton.jit
        def ttiny3(a, b, c, BLOCK: ttl.constexpr):
            offs = ttl.arange(0, BLOCK)
            ttl.store(c + offs, ttl.load(a + offs) + ttl.load(b + offs))

        @triton.jit
        def ttiny16(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, out,
                    BLOCK: ttl.constexpr):
            offs = ttl.arange(0, BLOCK)
            ttl.store(out + offs, ttl.load(a0 + offs) + ttl.load(a14 + offs))

        results["triton_3"] = time_launches(lambda: ttiny3[(1,)](ts[0], ts[1], ts[2], BLOCK=128))
        results["triton_16"] = time_launches(lambda: ttiny16[(1,)](*ts, BLOCK=128))
    except ImportError:
        print("triton not installed: no anchor")
    results["torch_add"] = time_launches(lambda: torch.add(ts[0], ts[1], out=ts[2]))
    print(f"{'launch (µs/launch)':<20} {'3 args':>8} {'16 args':>8}")
    for name in ("tessera", "triton"):
        if f"{name}_3" in results:
            print(f"{name:<20} {results[f'{name}_3'] * 1e6:>8.2f} {results[f'{name}_16'] * 1e6:>8.2f}")
    print(f"{'torch.add':<20} {results['torch_add'] * 1e6:>8.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
