"""The masked-attention TMA path A/B (``benchmarks/attention_masked.py --tma-ab``): on one
sm_90a GPU, tessera.ops.attention_masked with TESSERA_ATTENTION_TMA off (K and V by cp.async,
the pointer path) and on (k, v as host tensor descriptors in the forward and the backward's dQ
kernel, copied by the TMA in the loops that hold no 2-D mask or bias tile:
docs/perf/masked_attention.md, "TMA"), beside FlexAttention compiled, forward and backward
(autograd.grad of one forward's graph, retain_graph) timed apart, each in the same run in
alternating rounds (tessera.testing.do_bench_interleaved) so that clock drift falls on all alike.

The cases are attention_masked.py's (its --quick six, or all), with its inputs: a (1, 1, S, S)
mask and a learnable key bias (1, H, 1, S) ("tessera"), and at the all-true mask the same
without the bias ("nobias": no bias row in the loops). Each variant is autotuned and compiled
inside its knob scope (the knob is read at each call and the TMA constexpr joins the tuning
key) and checked against the other (relative error of O; above 2e-2 prints WRONG).
"""
from __future__ import annotations

import math
from typing import Callable, Dict, List

VARIANTS = {"tma_off": dict(attention_tma="off"), "tma_on": dict(attention_tma="on")}


def scoped(**knob_values) -> Callable:
    from tessera.config import knobs
    return lambda: knobs.scope(**knob_values)


def measure(torch, S: int, D: int, kind: str, make_mask: Callable, flex_setup: Callable,
            rel: Callable, tokens: int, rounds: int = 7) -> List[dict]:
    """The rows of one case: with the key bias, and (all-true mask) without it."""
    from tessera.ops import attention_masked
    from tessera.ops.masked_attention import forward as mf
    from tessera.testing import do_bench_interleaved

    gen = torch.Generator(device="cuda").manual_seed(S + D)
    B, H = tokens // S, 16 if D == 64 else 8
    q, k, v = (torch.randn((B, H, S, D), generator=gen, device="cuda", dtype=torch.bfloat16,
                           requires_grad=True) for _ in range(3))
    bias = (torch.randn((1, H, 1, S), generator=gen, device="cuda") * 0.5).to(
        torch.bfloat16).requires_grad_()
    mask = make_mask(torch, kind, S, gen)
    do = torch.randn((B, H, S, D), generator=gen, device="cuda", dtype=torch.bfloat16)
    rows = []
    for name, with_bias in (("tessera", bias), ("nobias", None)):
        if name == "nobias" and kind != "dense":
            continue
        row = {"S": S, "D": D, "B": B, "H": H, "mask": kind, "provider": name}
        leaves = (q, k, v) if with_bias is None else (q, k, v, bias)
        runs: Dict[str, Callable] = {}
        backward: Dict[str, Callable] = {}
        contexts: Dict[str, Callable] = {}
        outputs = {}
        for variant, knob_values in VARIANTS.items():
            with scoped(**knob_values)():
                lse = torch.empty(q.shape[:3], device="cuda", dtype=torch.float32)
                row[f"{variant}_path"] = "tma" if mf.forward_launch(
                    q, k, v, mask, with_bias, False, None, q, lse)[2]["TMA"] else "pointer"
                o = attention_masked(q, k, v, mask=mask, bias=with_bias)
                outputs[variant] = (o.detach(), *torch.autograd.grad(o, leaves, do,
                                                                     retain_graph=True))
                torch.cuda.synchronize()  # autotuned and compiled in scope
            runs[variant] = (lambda b=with_bias: attention_masked(q, k, v, mask=mask, bias=b))
            backward[variant] = (lambda o=o: torch.autograd.grad(o, leaves, do,
                                                                 retain_graph=True))
            contexts[variant] = scoped(**knob_values)
        row["error_on_vs_off"] = max(rel(a, b) for a, b in zip(outputs["tma_on"],
                                                               outputs["tma_off"]))
        if with_bias is not None:
            try:
                flex = flex_setup(torch, q, mask, bias)
                o_flex = flex(q, k, v)  # compiles before timing
                runs["flex"] = lambda: flex(q, k, v)
                backward["flex"] = lambda: torch.autograd.grad(o_flex, leaves, do,
                                                               retain_graph=True)
            except Exception as error:  # noqa: BLE001  (a torch without FlexAttention)
                row["flex_note"] = f"n/a: {type(error).__name__}: {str(error)[:120]}"
        for pass_name, fns in (("fwd", runs), ("bwd", backward)):
            timed = dict(row, pass_name=pass_name)
            times = do_bench_interleaved(fns, rounds=rounds, contexts=contexts)
            for variant, ms in times.items():
                timed[f"{variant}_ms"] = ms
            timed["on_over_off"] = timed["tma_off_ms"] / timed["tma_on_ms"]
            if "flex_ms" in timed:
                timed["on_over_flex"] = timed["tma_on_ms"] / timed["flex_ms"]
                timed["off_over_flex"] = timed["tma_off_ms"] / timed["flex_ms"]
            rows.append(timed)
        torch.cuda.empty_cache()
    return rows


def table(rows: List[dict]) -> str:
    """Markdown: ms per pass and variant, the TMA's speedup (off/on) and each over Flex's time
    (< 1: Tessera faster)."""
    head = ("| pass | S | D | mask | provider | path (on) | tma_off ms | tma_on ms | flex ms | "
            "off/on | on/flex | off/flex | err on-off |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        cells = [f"{r.get(n, math.nan):.3f}" for n in ("tma_off_ms", "tma_on_ms", "flex_ms")]
        ratios = [f"{r.get(n, math.nan):.3f}x" for n in ("on_over_off", "on_over_flex",
                                                          "off_over_flex")]
        error = r["error_on_vs_off"]
        lines.append(f"| {r['pass_name']} | {r['S']} | {r['D']} | {r['mask']} | {r['provider']} | "
                     f"{r['tma_on_path']} | " + " | ".join(cells + ratios)
                     + f" | {error:.1e}{' WRONG' if error > 2e-2 else ''} |")
    return "\n".join(lines)
