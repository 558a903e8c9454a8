"""The attention forward's TMA path A/B (``benchmarks/attention.py --tma-ab``): on one sm_90a
GPU, tessera.ops.attention_forward with knobs.tma off (K, V and Q by cp.async, the pointer
path) and on (per-head tensor descriptors copied by the TMA), and on with
knobs.warp_specialize (the unmasked loop's copies from a producer warpgroup, where the compiler
specializes it), beside SDPA's cuDNN and flash backends, timed in the same run in alternating
rounds (tessera.testing.do_bench_interleaved) so that clock drift falls on all alike.
``--tma-ab-pass bwd`` (or ``both``): the same for tessera.ops.attention_backward (its dK/dV and
dQ kernels; the forward's O and lse computed once, outside the timing) against SDPA's cuDNN
backward (torch.autograd.grad of its output), FLOPs 2.5x the forward's, plus the fused dQ on
the TMA path (``atomic_dq=True``: dQ accumulated by the dK/dV kernel, no dQ kernel).

Each variant is checked against float64 (O, poisoned first) and autotuned/compiled inside its
knob scope (the knobs are part of a launch's key: a launch outside the scope would pick the
other setting's kernel). FLOPs: 4·B·H·S²·D, halved when causal. docs/perf/attention_tma.md.
"""
from __future__ import annotations

import math
from typing import Callable, Dict, List, Sequence

# (S, D) at 16k tokens x 2048 hidden (FlashAttention-3's sweep): B = 16384 / S, H = 2048 / D.
CASES = [(S, D) for D in (64, 128) for S in (1024, 4096, 16384)]
QUICK_CASES = [(4096, 64), (4096, 128)]
VARIANTS = {"tma_off": dict(tma=False, warp_specialize=False),
            "tma_on": dict(tma=True, warp_specialize=False, attention_tma="on"),
            "tma_ws": dict(tma=True, warp_specialize=True, attention_tma="on")}
# The backward's: name -> (knobs, attention_backward's keyword arguments).
BACKWARD_VARIANTS = {"tma_off": (VARIANTS["tma_off"], {}), "tma_on": (VARIANTS["tma_on"], {}),
                     "fused_dq": (VARIANTS["tma_on"], {"atomic_dq": True})}


def scoped(**knob_values) -> Callable:
    """A context factory for ``knobs.scope(**knob_values)`` (entered around each round)."""
    from tessera.config import knobs
    return lambda: knobs.scope(**knob_values)


def cases(quick: bool, dtypes: Sequence[str]) -> List[dict]:
    return [dict(B=16384 // S, H=2048 // D, S=S, D=D, causal=causal, dtype=dtype)
            for S, D in (QUICK_CASES if quick else CASES) for causal in (False, True)
            for dtype in dtypes]


def measure(case: dict, reference: Callable, relative_error: Callable, bound: float,
            rounds: int = 7) -> dict:
    """One row: each variant's and SDPA's ms and TFLOP/s, the errors, the ratios."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from tessera.ops import attention_forward
    from tessera.ops.flash_attention import tma_path
    from tessera.testing import do_bench_interleaved

    B, H, S, D, causal = (case[key] for key in ("B", "H", "S", "D", "causal"))
    dtype = getattr(torch, case["dtype"])
    q, k, v = (torch.randn((B, H, S, D), device="cuda", dtype=dtype) for _ in range(3))
    out = torch.empty_like(q)
    ref = reference(q, k, v, torch.zeros_like(q), causal)[0]
    row = dict(case)
    runs: Dict[str, Callable] = {}
    contexts: Dict[str, Callable] = {}
    for name, knob_values in VARIANTS.items():
        with scoped(**knob_values)():
            row[f"{name}_path"] = "tma" if tma_path(q, k, v) else "pointer"
            out.fill_(float("nan"))
            attention_forward(q, k, v, causal, out=out)  # autotunes and compiles in scope
            torch.cuda.synchronize()
            row[f"{name}_error"] = relative_error(out, ref)
        runs[name] = lambda: attention_forward(q, k, v, causal, out=out)
        contexts[name] = scoped(**knob_values)
    for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION),
                          ("flash", SDPBackend.FLASH_ATTENTION)):
        def sdpa(backend=backend):
            with sdpa_kernel(backend):
                return torch.nn.functional.scaled_dot_product_attention(q, k, v,
                                                                        is_causal=causal)
        try:
            row[f"{name}_error"] = relative_error(sdpa(), ref)
            runs[name] = sdpa
        except RuntimeError as exc:  # the backend refuses the case
            row[f"{name}_error"] = f"n/a: {str(exc).splitlines()[0][:80]}"
    times = do_bench_interleaved(runs, rounds=rounds, contexts=contexts)
    flops = 4 * B * H * S * S * D / (2 if causal else 1)
    for name, ms in times.items():
        row[f"{name}_ms"], row[f"{name}_tflops"] = ms, flops / ms / 1e9
        if isinstance(row.get(f"{name}_error"), float) and row[f"{name}_error"] > bound:
            row[f"{name}_tflops"] = math.nan  # WRONG: no speed
    return row


def measure_backward(case: dict, reference: Callable, relative_error: Callable, bound: float,
                     rounds: int = 7) -> dict:
    """One backward row: each variant's and cuDNN's ms and TFLOP/s, the errors, the ratios
    (dQ, dK and dV checked against float64, the worst of the three; outputs poisoned)."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from tessera.ops import attention_backward, attention_forward
    from tessera.ops.flash_attention import tma_path
    from tessera.testing import do_bench_interleaved

    B, H, S, D, causal = (case[key] for key in ("B", "H", "S", "D", "causal"))
    dtype = getattr(torch, case["dtype"])
    q, k, v, do = (torch.randn((B, H, S, D), device="cuda", dtype=dtype) for _ in range(4))
    ref = reference(q, k, v, do, causal)[1:]
    o, lse = attention_forward(q, k, v, causal)
    grads = [torch.empty_like(q) for _ in range(3)]
    row = dict(case, pass_name="bwd")
    runs: Dict[str, Callable] = {}
    contexts: Dict[str, Callable] = {}
    for name, (knob_values, call) in BACKWARD_VARIANTS.items():
        with scoped(**knob_values)():
            row[f"{name}_path"] = ("tma" if tma_path(q, k, v, do, kernel="bwd", causal=causal)
                                  else "pointer")
            for g in grads:
                g.fill_(float("nan"))
            attention_backward(q, k, v, o, lse, do, causal, dq=grads[0], dk=grads[1],
                               dv=grads[2], **call)  # autotunes and compiles in scope
            torch.cuda.synchronize()
            row[f"{name}_error"] = max(relative_error(g, r) for g, r in zip(grads, ref))
        runs[name] = (lambda call=call: attention_backward(
            q, k, v, o, lse, do, causal, dq=grads[0], dk=grads[1], dv=grads[2], **call))
        contexts[name] = scoped(**knob_values)
    try:
        leaves = [x.detach().requires_grad_() for x in (q, k, v)]
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            out = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=causal)

        def cudnn():
            return torch.autograd.grad(out, leaves, do, retain_graph=True)
        row["cudnn_error"] = max(relative_error(g, r) for g, r in zip(cudnn(), ref))
        runs["cudnn"] = cudnn
    except RuntimeError as exc:  # the backend refuses the case
        row["cudnn_error"] = f"n/a: {str(exc).splitlines()[0][:80]}"
    times = do_bench_interleaved(runs, rounds=rounds, contexts=contexts)
    flops = 2.5 * 4 * B * H * S * S * D / (2 if causal else 1)
    for name, ms in times.items():
        row[f"{name}_ms"], row[f"{name}_tflops"] = ms, flops / ms / 1e9
        if isinstance(row.get(f"{name}_error"), float) and row[f"{name}_error"] > 2 * bound:
            row[f"{name}_tflops"] = math.nan  # WRONG: no speed (gradients: twice the bound)
    return row


def backward_table(rows: List[dict]) -> str:
    """Markdown: the backward's TFLOP/s, TMA on / off, fused dQ / TMA on, TMA on / cuDNN and
    fused dQ / cuDNN (speed ratios)."""
    head = ("| S | D | causal | dtype | tma_off | tma_on | fused_dq | cuDNN | on/off | fused/on "
            "| on/cuDNN | fused/cuDNN |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        cells = [f"{r.get(n + '_tflops', math.nan):.1f}"
                 for n in ("tma_off", "tma_on", "fused_dq", "cudnn")]
        ratios = [r.get(a + "_ms", math.nan) / r.get(b + "_ms", math.nan)
                  for a, b in (("tma_off", "tma_on"), ("tma_on", "fused_dq"),
                               ("cudnn", "tma_on"), ("cudnn", "fused_dq"))]
        lines.append(f"| {r['S']} | {r['D']} | {r['causal']} | {r['dtype']} | "
                     + " | ".join(cells) + " | " + " | ".join(f"{x:.3f}x" for x in ratios)
                     + " |")
    return "\n".join(lines)


def table(rows: List[dict]) -> str:
    """Markdown: TFLOP/s per variant, TMA on / off and TMA on / cuDNN."""
    head = ("| S | D | causal | dtype | tma_off | tma_on | tma_ws | cuDNN | flash | on/off "
            "| ws/off | on/cuDNN |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        cells = [f"{r.get(n + '_tflops', math.nan):.1f}"
                 for n in ("tma_off", "tma_on", "tma_ws", "cudnn", "flash")]
        ratios = [r.get(a + "_ms", math.nan) / r.get(b + "_ms", math.nan)
                  for a, b in (("tma_off", "tma_on"), ("tma_off", "tma_ws"), ("cudnn", "tma_on"))]
        lines.append(f"| {r['S']} | {r['D']} | {r['causal']} | {r['dtype']} | "
                     + " | ".join(cells) + " | " + " | ".join(f"{x:.3f}x" for x in ratios)
                     + " |")
    return "\n".join(lines)


def run(quick: bool, dtypes: Sequence[str], reference: Callable, relative_error: Callable,
        bounds: Dict[str, float], progress: Callable[[dict], None],
        passes: Sequence[str] = ("fwd",)) -> List[dict]:
    """The rows of `passes` ("fwd": measure, "bwd": measure_backward), forward ones first."""
    rows = []
    for pass_name in passes:
        timed = measure if pass_name == "fwd" else measure_backward
        for case in cases(quick, dtypes):
            rows.append(timed(case, reference, relative_error, bounds[case["dtype"]]))
            progress(rows[-1])
    return rows
