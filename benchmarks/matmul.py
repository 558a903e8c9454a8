"""Matmul throughput: tessera.ops.matmul, autotuned (wgmma on sm_90a, else mma.sync; cp.async
rings) vs torch.matmul (cuBLAS).

Method (docs/benchmarks.md): square fp16 and bf16 products at 4096³ and 8192³, fresh random
inputs, the output poisoned before the checked run; both kernels timed in the same process
with CUDA events (median, L2 flushed before each run, compile and tuning outside the timing);
TFLOP/s = 2·n³ / time. Prints a table and, with --json OUT, writes every number.

    python benchmarks/matmul.py --json matmul.json [--sizes 4096 8192] [--dtypes float16]
        [--descriptor] [--warp-specialize] [--wgmma-pipeline]

--descriptor adds the host-TensorDescriptor matmul of scripts/descriptor_matmul.py (each of its
configs, the best kept), with loads through cp.async and through TMA (sm_90a), to measure the
TMA path against the pointer path and cuBLAS in the same run.

--warp-specialize adds the descriptor matmul by TMA with a producer warpgroup
(TESSERA_WARP_SPECIALIZE: docs/perf/warp_specialization.md) beside its plain TMA pipeline.

--wgmma-pipeline adds tessera.ops.matmul's kernel compiled with knobs.wgmma_pipeline off and on
(products in flight across loop iterations: docs/perf/wgmma_across_iterations.md), each of
gemm.CONFIGS timed and the best kept per setting, in the same run (a fresh @jit per setting:
the knob is read at compile time). The descriptor rows follow TESSERA_WGMMA_PIPELINE.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import tessera
import torch
from tessera.errors import OutOfResources
from tessera.testing import do_bench, relative_error
from tessera.ops import gemm, matmul


def measure(n: int, dtype_name: str) -> dict:
    dtype = getattr(torch, dtype_name)
    a = torch.randn((n, n), device="cuda", dtype=dtype)
    b = torch.randn((n, n), device="cuda", dtype=dtype)
    out = torch.full((n, n), float("nan"), device="cuda", dtype=dtype)
    matmul(a, b, out=out)  # compiles and tunes
    torch.cuda.synchronize()
    ref = (a.double() @ b.double()).cpu().numpy()
    error = relative_error(out.float().cpu().numpy(), ref)
    t_tessera = do_bench(lambda: matmul(a, b, out=out), return_mode="median")
    t_torch = do_bench(lambda: torch.matmul(a, b, out=out), return_mode="median")
    flops = 2 * n ** 3
    return {"n": n, "dtype": dtype_name, "tessera_ms": t_tessera, "torch_ms": t_torch,
            "tessera_tflops": flops / t_tessera / 1e9, "torch_tflops": flops / t_torch / 1e9,
            "ratio": t_torch / t_tessera, "relative_error": error,
            "config": str(getattr(gemm.tuned_matmul_kernel, "best_config", ""))}


def descriptor_ms(a, b, out, tma) -> tuple:
    """Best median time of the descriptor matmul over its configs, loads by TMA (``tma`` True),
    by TMA from a producer warpgroup (``tma`` == "warp_specialize") or by cp.async."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "scripts"))
    import descriptor_matmul as dm
    from tessera.config import knobs
    n = a.shape[0]
    best = (float("inf"), None, float("nan"))
    for meta in dm.CONFIGS:
        grid = ((n + meta["BM"] - 1) // meta["BM"], (n + meta["BN"] - 1) // meta["BN"])
        with knobs.scope(tma=bool(tma), warp_specialize=tma == "warp_specialize"):
            descs = dm.descriptors(a, b, out, meta)
            run = lambda: dm.descriptor_matmul_kernel[grid](*descs, n, **meta)  # noqa: E731
            out.fill_(float("nan"))
            run()
            torch.cuda.synchronize()
            error = relative_error(out.float().cpu().numpy(),
                                   (a.double() @ b.double()).cpu().numpy())
            ms = do_bench(run, return_mode="median")
        if ms < best[0]:
            best = (ms, str(meta), error)
    return best


def pipeline_ms(a, b, out, pipeline: bool) -> tuple:
    """Best median time of tessera.ops.matmul's kernel over gemm.CONFIGS, each compiled anew
    with knobs.wgmma_pipeline = ``pipeline``: (ms, config, relative error)."""
    from tessera.config import knobs
    n = a.shape[0]
    ref = (a.double() @ b.double()).cpu().numpy()
    best = (float("inf"), None, float("nan"))
    for config in gemm.CONFIGS:
        meta = config.kwargs
        grid = (tessera.cdiv(n, meta["BLOCK_M"]) * tessera.cdiv(n, meta["BLOCK_N"]),)
        kernel = tessera.jit(gemm.matmul_kernel.fn)
        run = lambda: kernel[grid](  # noqa: E731
            a, b, out, out, n, n, n, *a.stride(), *b.stride(), *out.stride(), HAS_BIAS=False,
            ACTIVATION="", num_warps=config.num_warps, num_stages=config.num_stages, **meta)
        out.fill_(float("nan"))
        try:
            with knobs.scope(wgmma_pipeline=pipeline):  # compiles with the knob
                run()
        except OutOfResources:
            continue
        torch.cuda.synchronize()
        error = relative_error(out.float().cpu().numpy(), ref)
        ms = do_bench(run, return_mode="median")
        if ms < best[0]:
            best = (ms, f"{meta} w{config.num_warps} s{config.num_stages}", error)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--dtypes", nargs="+", default=["float16", "bfloat16"])
    parser.add_argument("--descriptor", action="store_true",
                        help="also the descriptor matmul, by cp.async and by TMA")
    parser.add_argument("--warp-specialize", action="store_true",
                        help="also the descriptor matmul by TMA with a producer warpgroup")
    parser.add_argument("--wgmma-pipeline", action="store_true",
                        help="also the matmul kernel with knobs.wgmma_pipeline off and on")
    args = parser.parse_args()
    rows = [measure(n, dtype) for dtype in args.dtypes for n in args.sizes]
    variants = []  # (label, timing function, its flag), each timed on fresh inputs per row
    if args.wgmma_pipeline:
        variants += [("pipeline_off", pipeline_ms, False), ("pipeline_on", pipeline_ms, True)]
    if args.descriptor:
        variants += [("descriptor", descriptor_ms, False), ("descriptor_tma", descriptor_ms, True)]
    if args.warp_specialize:  # beside the same kernel's plain TMA pipeline
        if not args.descriptor:
            variants += [("descriptor_tma", descriptor_ms, True)]
        variants += [("descriptor_ws", descriptor_ms, "warp_specialize")]
    for r in rows if variants else []:
        dtype = getattr(torch, r["dtype"])
        a, b = (torch.randn((r["n"], r["n"]), device="cuda", dtype=dtype) for _ in "ab")
        out = torch.empty_like(a)
        for label, timing, flag in variants:
            ms, meta, error = timing(a, b, out, flag)
            r.update({f"{label}_ms": ms, f"{label}_tflops": 2 * r["n"] ** 3 / ms / 1e9,
                      f"{label}_config": meta, f"{label}_relative_error": error})
    device = torch.cuda.get_device_name()
    print(f"matmul on {device} (TFLOP/s, median; ratio = tessera / cuBLAS)")
    print(f"{'dtype':<9} {'n':>6} {'tessera':>8} {'cuBLAS':>8} {'ratio':>7} {'rel err':>8}")
    for r in rows:
        print(f"{r['dtype']:<9} {r['n']:>6} {r['tessera_tflops']:>8.1f} {r['torch_tflops']:>8.1f} "
              f"{r['ratio']:>7.1%} {r['relative_error']:>8.1e}")
        for label in ("pipeline_off", "pipeline_on", "descriptor", "descriptor_tma",
                      "descriptor_ws"):
            if f"{label}_ms" in r:
                print(f"  {label:<15} {r[f'{label}_tflops']:>8.1f} TFLOP/s "
                      f"({r['torch_ms'] / r[f'{label}_ms']:.1%} of cuBLAS), rel err "
                      f"{r[f'{label}_relative_error']:.1e}, {r[f'{label}_config']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "matmul", "device": device, "results": rows}, f, indent=2)


if __name__ == "__main__":
    main()
