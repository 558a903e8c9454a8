"""Matmul throughput: tessera.ops.matmul, autotuned (wgmma on sm_90a, else mma.sync; cp.async
rings) vs torch.matmul (cuBLAS).

Method (docs/benchmarks.md): square fp16 and bf16 products at 4096³ and 8192³, fresh random
inputs, the output poisoned before the checked run; every kernel of a row (tessera.ops, cuBLAS
and the variants' best configs) timed in the same process with CUDA events in alternating
rounds (do_bench_interleaved: the median of 7 rounds' medians, L2 flushed before each run,
compile and tuning outside the timing), so clock drift falls on all alike; TFLOP/s = 2·n³ /
time. Prints a table and, with --json OUT, writes every number.

    python benchmarks/matmul.py --json matmul.json [--sizes 4096 8192] [--dtypes float16]
        [--descriptor] [--warp-specialize] [--wgmma-pipeline] [--families]

Each row names the config the autotuner picked and its family: "pointer" (gemm.matmul_kernel,
one program per tile, cp.async rings) or "tma" (gemm_tma.matmul_tma_kernel, persistent, TMA
rings kept across tiles: sm_90a only; docs/perf/matmul_ops_tma.md).

--families adds each family's best config (gemm.CONFIGS and gemm.TMA_CONFIGS, each launched
untuned through gemm.matmul_forward(config=...), the fastest of each kept) to the row's
interleaved timing, and prints the TMA family's gain over the pointer family.

--descriptor adds the host-TensorDescriptor matmul of scripts/descriptor_matmul.py (each of its
configs, the best kept), with loads through cp.async and through TMA (sm_90a), to measure the
TMA path against the pointer path and cuBLAS in the same run.

--warp-specialize adds the descriptor matmul by TMA with a producer warpgroup
(TESSERA_WARP_SPECIALIZE: docs/perf/warp_specialization.md) beside its plain TMA pipeline.

--wgmma-pipeline adds tessera.ops.matmul's kernel compiled with knobs.wgmma_pipeline off and on
(products in flight across loop iterations: docs/perf/wgmma_across_iterations.md), each of
gemm.CONFIGS timed and the best kept per setting, in the same run (a fresh @jit per setting:
the knob is read at compile time). The descriptor rows follow TESSERA_WGMMA_PIPELINE.

--fp8 adds a row per size: the scaled fp8 matmul of scripts/fp8_matmul.py (e4m3 A row-major,
B column-major, per-tensor scales of 1.0, float32 accumulation, bf16 out; each of its configs,
the best kept; wgmma's native fp8 kinds on sm_90a) against torch._scaled_mm on the same
operands (cuBLAS; its default accumulation, and use_fast_accum=True as "torch_fast_accum"),
in the same interleaved timing.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys

import tessera
import torch
from tessera.errors import OutOfResources
from tessera.testing import do_bench, do_bench_interleaved, relative_error
from tessera.ops import gemm, gemm_tma, matmul


def measure(n: int, dtype_name: str) -> dict:
    dtype = getattr(torch, dtype_name)
    a = torch.randn((n, n), device="cuda", dtype=dtype)
    b = torch.randn((n, n), device="cuda", dtype=dtype)
    out = torch.full((n, n), float("nan"), device="cuda", dtype=dtype)
    matmul(a, b, out=out)  # compiles and tunes
    torch.cuda.synchronize()
    ref = (a.double() @ b.double()).cpu().numpy()
    error = relative_error(out.float().cpu().numpy(), ref)
    runs = {"tessera": lambda: matmul(a, b, out=out), "torch": lambda: torch.matmul(a, b, out=out)}
    picked = gemm.tuned_matmul_kernel.best_config
    return {"n": n, "dtype": dtype_name, "relative_error": error, "runs": runs,
            "config": str(picked), "family": gemm.family(picked),
            # What the autotuner measured per config (ms; close finalists from its alternating
            # rounds), to compare its pick with the variants' interleaved best.
            "tuning_ms": {f"{gemm.family(c)} {c}": ms for c, ms in
                          getattr(gemm.tuned_matmul_kernel, "configs_timings", {}).items()}}


def time_row(r: dict) -> None:
    """Times every kernel of row ``r`` (its "runs") in alternating rounds; adds ms, TFLOP/s
    and the ratio to cuBLAS of each."""
    times = do_bench_interleaved(r.pop("runs"), contexts=r.pop("contexts", {}))
    flops = 2 * r["n"] ** 3
    for label, ms in times.items():
        r[f"{label}_ms"], r[f"{label}_tflops"] = ms, flops / ms / 1e9
    r["ratio"] = times["torch"] / times["tessera"]


def scoped(**knob_values):
    """A context factory for ``knobs.scope(**knob_values)``: the knobs that change the code are
    part of a launch's key, so a variant's kernel is picked and timed inside its scope (a
    kernel launched outside it would be the other setting's kernel)."""
    from tessera.config import knobs
    return lambda: knobs.scope(**knob_values)


def best_of(candidates, context, a, b, out) -> tuple:
    """(run, config, relative error) of the fastest of ``candidates`` ((config, run) pairs,
    each checked against float64 on poisoned output first; a config that does not fit is
    skipped), all inside ``context()``. The pick uses one do_bench each; the final times come
    from time_row."""
    ref = (a.double() @ b.double()).cpu().numpy()
    best = (float("inf"), None, None, float("nan"))
    with context():
        for meta, run in candidates:
            out.fill_(float("nan"))
            try:
                run()
            except OutOfResources:
                continue
            torch.cuda.synchronize()
            error = relative_error(out.float().cpu().numpy(), ref)
            ms = do_bench(run, return_mode="median")
            if ms < best[0]:
                best = (ms, run, meta, error)
    return best[1:]


def descriptor_runs(a, b, out):
    """The descriptor matmul at each of its configs (loads by cp.async, TMA or TMA from a
    producer warpgroup: the variant's knobs, set around the calls)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "scripts"))
    import descriptor_matmul as dm
    n = a.shape[0]
    for meta in dm.CONFIGS:
        grid = ((n + meta["BM"] - 1) // meta["BM"], (n + meta["BN"] - 1) // meta["BN"])
        descs = dm.descriptors(a, b, out, meta)
        run = (lambda grid=grid, descs=descs, meta=meta:
               dm.descriptor_matmul_kernel[grid](*descs, n, **meta))
        yield str(meta), run


def pipeline_runs(a, b, out):
    """tessera.ops.matmul's kernel at each of gemm.CONFIGS, compiled anew (a fresh @jit: the
    variant's knobs.wgmma_pipeline, set around the calls)."""
    n = a.shape[0]
    for config in gemm.CONFIGS:
        meta = config.kwargs
        grid = (tessera.cdiv(n, meta["BLOCK_M"]) * tessera.cdiv(n, meta["BLOCK_N"]),)
        kernel = tessera.jit(gemm.matmul_kernel.fn)
        run = (lambda kernel=kernel, grid=grid, config=config, meta=meta: kernel[grid](
            a, b, out, out, n, n, n, *a.stride(), *b.stride(), *out.stride(), HAS_BIAS=False,
            ACTIVATION="", num_warps=config.num_warps, num_stages=config.num_stages, **meta))
        yield f"{meta} w{config.num_warps} s{config.num_stages}", run


def family_runs(name: str):
    """Candidates of one family of ops.matmul: each of its configs launched untuned (the
    launch ops.matmul makes for it); none for the TMA family where the inputs do not allow
    it (gemm_tma.tma_rules: not sm_90a, TESSERA_TMA=0, ...)."""
    configs = gemm.TMA_CONFIGS if name == "tma" else gemm.CONFIGS

    def runs(a, b, out):
        if name == "tma" and not gemm_tma.tma_rules(a, b)[0]:
            return
        for config in configs:
            yield f"{name} {config}", (lambda config=config:
                                       gemm.matmul_forward(a, b, out=out, config=config))
    return runs


def measure_fp8(n: int) -> dict:
    """The fp8 row: scripts/fp8_matmul.py's best config against torch._scaled_mm."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "scripts"))
    import fp8_matmul
    e4m3 = torch.float8_e4m3fn
    a = torch.randn((n, n), device="cuda").to(e4m3)
    b = torch.randn((n, n), device="cuda").to(e4m3).t().contiguous().t()  # column-major
    out = torch.empty((n, n), device="cuda", dtype=torch.bfloat16)
    scale = torch.ones((), device="cuda", dtype=torch.float32)
    candidates = [(f"{meta} w{warps} s{stages}",
                   lambda meta=meta, warps=warps, stages=stages: fp8_matmul.run(
                       a, b, out, scale, scale, meta, warps, stages))
                  for meta, warps, stages in fp8_matmul.CONFIGS]
    run, config, error = best_of(candidates, contextlib.nullcontext, a, b, out)
    if run is None:
        raise RuntimeError("no config of scripts/fp8_matmul.py fits this GPU")
    scaled = {"torch": False, "torch_fast_accum": True}
    runs = {"tessera": run}
    for label, fast in scaled.items():
        runs[label] = (lambda fast=fast: torch._scaled_mm(
            a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16, use_fast_accum=fast))
    return {"n": n, "dtype": "float8_e4m3fn", "relative_error": error, "runs": runs,
            "config": config}


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
    parser.add_argument("--families", action="store_true",
                        help="also the best pointer and the best TMA config, side by side")
    parser.add_argument("--fp8", action="store_true",
                        help="also a scaled e4m3 matmul against torch._scaled_mm per size")
    args = parser.parse_args()
    rows = [measure(n, dtype) for dtype in args.dtypes for n in args.sizes]
    fp8_rows = [measure_fp8(n) for n in args.sizes] if args.fp8 else []
    variants = []  # (label, candidate runs, knob context), on fresh inputs per row
    if args.wgmma_pipeline:
        variants += [("pipeline_off", pipeline_runs, scoped(wgmma_pipeline=False)),
                     ("pipeline_on", pipeline_runs, scoped(wgmma_pipeline=True))]
    if args.families:
        variants += [("pointer_best", family_runs("pointer"), contextlib.nullcontext),
                     ("tma_best", family_runs("tma"), contextlib.nullcontext)]
    tma, ws = scoped(tma=True, warp_specialize=False), scoped(tma=True, warp_specialize=True)
    if args.descriptor:
        variants += [("descriptor", descriptor_runs, scoped(tma=False, warp_specialize=False)),
                     ("descriptor_tma", descriptor_runs, tma)]
    if args.warp_specialize:  # beside the same kernel's plain TMA pipeline
        if not args.descriptor:
            variants += [("descriptor_tma", descriptor_runs, tma)]
        variants += [("descriptor_ws", descriptor_runs, ws)]
    for r in fp8_rows:  # the fp8 kernel and cuBLAS's, no knob variants
        time_row(r)
        r["ratio_fast_accum"] = r["torch_fast_accum_ms"] / r["tessera_ms"]
    for r in rows:
        if variants:  # each variant's best config joins the row's interleaved timing
            dtype = getattr(torch, r["dtype"])
            a, b = (torch.randn((r["n"], r["n"]), device="cuda", dtype=dtype) for _ in "ab")
            out = torch.empty_like(a)
            r["contexts"] = {}
            for label, candidates, context in variants:
                run, meta, error = best_of(candidates(a, b, out), context, a, b, out)
                if run is not None:
                    r["runs"][label], r["contexts"][label] = run, context
                    r.update({f"{label}_config": meta, f"{label}_relative_error": error})
        time_row(r)
    device = torch.cuda.get_device_name()
    print(f"matmul on {device} (TFLOP/s, median; ratio = tessera / cuBLAS)")
    print(f"{'dtype':<9} {'n':>6} {'tessera':>8} {'cuBLAS':>8} {'ratio':>7} {'rel err':>8}")
    for r in rows:
        print(f"{r['dtype']:<9} {r['n']:>6} {r['tessera_tflops']:>8.1f} {r['torch_tflops']:>8.1f} "
              f"{r['ratio']:>7.1%} {r['relative_error']:>8.1e}")
        print(f"  autotuner's pick: {r['family']} {r['config']}")
        tuned = sorted(r.get("tuning_ms", {}).items(), key=lambda item: item[1])[:3]
        print("  autotuner's fastest: " + "; ".join(f"{ms:.4f} ms {c}" for c, ms in tuned))
        for label in ("pointer_best", "tma_best", "pipeline_off", "pipeline_on", "descriptor",
                      "descriptor_tma", "descriptor_ws"):
            if f"{label}_ms" in r:
                print(f"  {label:<15} {r[f'{label}_tflops']:>8.1f} TFLOP/s "
                      f"({r['torch_ms'] / r[f'{label}_ms']:.1%} of cuBLAS), rel err "
                      f"{r[f'{label}_relative_error']:.1e}, {r[f'{label}_config']}")
        if "tma_best_ms" in r and "pointer_best_ms" in r:
            r["tma_gain"] = r["pointer_best_ms"] / r["tma_best_ms"]
            print(f"  tma_best / pointer_best: {r['tma_gain']:.3f}x")
    for r in fp8_rows:
        print(f"{'e4m3':<9} {r['n']:>6} {r['tessera_tflops']:>8.1f} {r['torch_tflops']:>8.1f} "
              f"{r['ratio']:>7.1%} {r['relative_error']:>8.1e}  (torch._scaled_mm; "
              f"use_fast_accum: {r['torch_fast_accum_tflops']:.1f} TFLOP/s, ratio "
              f"{r['ratio_fast_accum']:.1%}; {r['config']})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "matmul", "device": device, "results": rows + fp8_rows},
                      f, indent=2)


if __name__ == "__main__":
    main()
