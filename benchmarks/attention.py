"""Fused attention (tessera.ops.attention) against PyTorch SDPA (flash, cuDNN and
memory-efficient backends), plain PyTorch attention and, when given, Triton's tutorial kernel:
the FlashAttention-3-style sweep, the CS336 student sweep and the CS336 leaderboard case of
docs/benchmarks.md, in one run on one GPU. (Kept as one file over the usual 400 lines: the
three sweeps share the providers, the float64 reference and the checks.)

Method: fresh random inputs per case; every provider's forward output and gradients are checked
against a float64 reference of the same inputs (chunked over heads and query rows, so S = 65536
fits) before it is timed: an error above the dtype's bound prints WRONG instead of a speed.
Tessera's outputs are poisoned (NaN) before the checked run. Timing: tessera.testing.do_bench
(CUDA events, L2 flushed, median). FLOPs: forward 4·B·H·S²·D (halved when causal), backward
2.5x that. Peak memory: torch.cuda.max_memory_allocated after reset_peak_memory_stats, minus
what was allocated before (the inputs). Out of memory is reported as OOM, unsupported cases as
n/a (the reason goes to the JSON and the notes under the tables).

    python3 benchmarks/attention.py --quick --json OUT.json --plot OUT.png
    python3 benchmarks/attention.py --sweep fa3 --triton-tutorial PATH  # Triton's own tutorial
    python3 benchmarks/attention.py --tma-ab --dtypes float16,bfloat16 --json OUT.json
        # the forward's TMA path off / on / warp-specialized beside cuDNN (sm_90a; about
        # 3 minutes for the 24 cases, --quick 8 cases)
    python3 benchmarks/attention.py --tma-ab --tma-ab-pass bwd --quick --json OUT.json
        # the backward's TMA path off / on and the fused dQ (atomic_dq) beside cuDNN's
        # backward (--tma-ab-pass both: both)

Estimated duration on an H100/H200 (warm kernel cache; add about 2 minutes of compilation when
cold): --sweep fa3 about 6 minutes (72 cases x 6 providers x 3 passes), --sweep cs336 about
4 minutes (80 cases, plain attention at S >= 32k dominates), --sweep leaderboard about 1 minute
(torch.compile, then 1 s + 10 s of timing as the leaderboard's do_bench); --sweep all about
11 minutes, more than one device call allows: run the sweeps separately. --quick (6 + 6 cases,
a 1 s leaderboard timing) takes about 2 minutes warm, 3-4 minutes cold.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import json
import math
import os
import sys
import warnings
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

DEVICE = "cuda"  # where the cases' inputs live (the CPU tests run the interpreter on "cpu")
COMPILE_BACKEND = "inductor"  # torch.compile's, for the leaderboard case

# Output bounds of docs/benchmarks.md; float32 is computed with tf32 by Tessera (the 10-bit mantissa
# of fp16). Gradients sum S products rounded to 16 bits twice (dP, dS): twice the bound.
BOUNDS = {"float16": 5e-3, "bfloat16": 1e-2, "float32": 5e-3}
GRAD_BOUND_FACTOR = 2.0
FA3_SEQS = (512, 1024, 2048, 4096, 8192, 16384)
FA3_DIMS = (64, 128, 256)
FA3_TOKENS, FA3_HIDDEN = 16384, 2048
CS336_SEQS = tuple(2 ** i for i in range(7, 17))   # 128 ... 65536
CS336_DIMS = (16, 32, 64, 128)
LEADERBOARD_SHAPE = (16, 16384, 64)                # (batch x heads, sequence, head dim)
LEADERBOARD_BEST_MS = 5.364
PASSES = ("fwd", "bwd", "fwd_bwd")
PASS_FLOPS = {"fwd": 1.0, "bwd": 2.5, "fwd_bwd": 3.5}
PROVIDERS = ("tessera", "flash", "cudnn", "efficient", "triton", "plain")


# ---- Cases, FLOPs, results and reports (pure Python: tests/python/benchmarks) ----

def attention_flops(B: int, H: int, S: int, D: int, causal: bool, pass_name: str = "fwd") -> float:
    """FLOPs of one pass: forward 4·B·H·S²·D (two S x S x D products), halved when causal;
    backward 2.5x (five products, one recomputed); fwd_bwd 3.5x."""
    return 4.0 * B * H * S * S * D / (2 if causal else 1) * PASS_FLOPS[pass_name]


def fa3_cases(quick: bool) -> List[dict]:
    """B·S = 16384 tokens and H·D = 2048 (FlashAttention-3's sizing)."""
    dtypes = ("float16",) if quick else ("float16", "bfloat16")
    shapes = [(4096, 64), (4096, 128), (16384, 128)] if quick else \
        [(S, D) for D in FA3_DIMS for S in FA3_SEQS]
    return [{"B": FA3_TOKENS // S, "H": FA3_HIDDEN // D, "S": S, "D": D, "causal": causal,
             "dtype": dtype} for dtype in dtypes for S, D in shapes for causal in (False, True)]


def cs336_cases(quick: bool) -> List[dict]:
    """Batch 1, one head, causal (CS336 assignment 2)."""
    shapes = [(1024, 64), (16384, 64), (65536, 128)] if quick else \
        [(S, d) for d in CS336_DIMS for S in CS336_SEQS]
    return [{"B": 1, "H": 1, "S": S, "D": d, "causal": True, "dtype": dtype}
            for dtype in ("bfloat16", "float32") for S, d in shapes]


def measured(ms: float, flops: float, error: float, bound: float) -> dict:
    """A timed pass; WRONG when the error is above the bound (NaN and inf never pass)."""
    ok = error <= bound
    return {"status": "ok" if ok else "wrong", "ms": ms, "tflops": flops / ms / 1e9,
            "error": error, "bound": bound}


def failed(status: str, reason: str = "") -> dict:
    return {"status": status, "ms": None, "tflops": None, "error": None, "reason": reason}


def classify(exc: BaseException) -> str:
    """OOM, n/a (the provider does not support the case) or error (it broke)."""
    text = str(exc)
    if "out of memory" in text.lower() or type(exc).__name__ == "OutOfMemoryError":
        return "OOM"
    if isinstance(exc, (AssertionError, NotImplementedError, ValueError)) or \
            "No available kernel" in text:
        return "n/a"
    return "error"


def cell(result: Optional[dict], key: str = "tflops", scale: float = 1.0, digits: int = 1) -> str:
    if not result:
        return "-"
    if result["status"] == "ok":
        return f"{result[key] * scale:.{digits}f}"
    return {"wrong": "WRONG"}.get(result["status"], result["status"])


def ratio(a: Optional[dict], b: Optional[dict], key: str = "tflops") -> str:
    if not a or not b or a["status"] != "ok" or b["status"] != "ok":
        return "-"
    return f"{a[key] / b[key]:.2f}x"


def fa3_table(rows: List[dict], pass_name: str) -> str:
    """TFLOP/s of one pass for every provider, Tessera over SDPA flash and cuDNN, its error."""
    from tessera.testing import Table

    cells = []
    for row in rows:
        res = {p: row["results"].get(p, {}).get(pass_name) for p in PROVIDERS}
        error = (res["tessera"] or {}).get("error")
        cells.append([row["dtype"], row["S"], row["D"], row["causal"]]
                     + [cell(res[p]) for p in PROVIDERS]
                     + [ratio(res["tessera"], res["flash"]), ratio(res["tessera"], res["cudnn"]),
                        "-" if error is None else f"{error:.1e}"])
    columns = ["dtype", "S", "D", "causal", *PROVIDERS, "/flash", "/cudnn", "error"]
    return f"attention {pass_name}, TFLOP/s (median)\n" + Table(columns, cells).to_string()


def cs336_table(rows: List[dict]) -> str:
    """Latencies (ms), Tessera's end-to-end speedup and peak memory (MiB) beyond the inputs."""
    from tessera.testing import Table

    cells = []
    for row in rows:
        times = [row["results"].get(p, {}) for p in ("tessera", "plain")]
        peaks = [row["memory"].get(p, {}) for p in ("tessera", "plain")]
        errors = [r["error"] for r in times[0].values() if r.get("error") is not None]
        cells.append([row["dtype"], row["S"], row["D"]]
                     + [cell(t.get(k), "ms", digits=3) for t in times for k in PASSES]
                     + [ratio(times[1].get("fwd_bwd"), times[0].get("fwd_bwd"), "ms")]
                     + [cell(m.get(k), "bytes", 2.0 ** -20, 0) for m in peaks
                        for k in ("fwd", "fwd_bwd")]
                     + [f"{max(errors):.1e}" if errors else "-"])
    columns = ["dtype", "S", "d", "tessera fwd", "bwd", "e2e", "plain fwd", "bwd", "e2e",
               "speedup", "MiB tessera fwd", "e2e", "MiB plain fwd", "e2e", "error"]
    return ("CS336 sweep (batch 1, one head, causal): ms; peak MiB beyond the inputs\n"
            + Table(columns, cells).to_string())


def leaderboard_line(result: dict) -> str:
    shape = "x".join(map(str, LEADERBOARD_SHAPE))
    if result.get("status") != "ok":
        status = {"wrong": "WRONG"}.get(result.get("status"), result.get("status"))
        error = f" (error {result['error']:.1e})" if result.get("error") is not None else ""
        return f"CS336 leaderboard ({shape} bf16 causal, torch.compile fwd+bwd): {status} " \
               f"{result.get('reason', '')}{error}"
    return (f"CS336 leaderboard ({shape} bf16 causal, torch.compile fwd+bwd): "
            f"{result['mean_ms']:.3f} ms mean, {result['median_ms']:.3f} ms median; best published "
            f"{LEADERBOARD_BEST_MS} ms -> {LEADERBOARD_BEST_MS / result['mean_ms']:.2f}x "
            f"(error {result['error']:.1e})")


def failure_notes(rows: List[dict]) -> List[str]:
    """One line per distinct (provider, status, reason) of the cases that were not measured."""
    seen: Dict[Tuple[str, str, str], int] = {}
    for row in rows:
        for provider, passes in row["results"].items():
            for res in passes.values():
                if res.get("reason"):
                    key = (provider, res["status"], res["reason"])
                    seen[key] = seen.get(key, 0) + 1
        if row.get("reason"):
            key = ("case", "error", row["reason"])
            seen[key] = seen.get(key, 0) + 1
    return [f"{p} {s} ({n}x): {r}" for (p, s, r), n in seen.items()]


def plot_fa3(rows: List[dict], path: str) -> None:
    """TFLOP/s against S: one panel per (dtype, pass) x (causal, D), one line per provider."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panel_rows = [(t, p) for t in sorted({r["dtype"] for r in rows}) for p in PASSES]
    panel_cols = sorted({(r["causal"], r["D"]) for r in rows})
    figure, axes = plt.subplots(len(panel_rows), len(panel_cols), squeeze=False,
                                layout="constrained",
                                figsize=(3.6 * len(panel_cols), 2.8 * len(panel_rows)))
    for i, (dtype, pass_name) in enumerate(panel_rows):
        for j, (causal, D) in enumerate(panel_cols):
            ax = axes[i][j]
            cases = sorted((r for r in rows if r["dtype"] == dtype and r["causal"] == causal
                            and r["D"] == D), key=lambda r: r["S"])
            for provider in PROVIDERS:
                ys = [((r["results"].get(provider) or {}).get(pass_name) or {}) for r in cases]
                ys = [y["tflops"] if y.get("status") == "ok" else math.nan for y in ys]
                if not all(math.isnan(y) for y in ys):
                    ax.plot([r["S"] for r in cases], ys, marker="o", label=provider,
                            color=f"C{PROVIDERS.index(provider)}")  # same color everywhere
            ax.set_xscale("log", base=2)
            ax.set_title(f"{dtype} {pass_name} D={D}{' causal' if causal else ''}", fontsize=9)
            ax.set_ylabel("TFLOP/s", fontsize=8)
            ax.tick_params(labelsize=7)
    labelled = {label: handle for ax in axes.flat
                for handle, label in zip(*ax.get_legend_handles_labels(), strict=True)}
    figure.legend(labelled.values(), labelled.keys(), loc="outside upper center",
                  ncol=len(labelled) or 1, fontsize=8)
    figure.savefig(path, dpi=80)
    plt.close(figure)


def jsonable(value):
    """``value`` with non-finite floats as strings ("inf", "nan"), so the JSON stays strict."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", default=None, help="write every number to this file")
    parser.add_argument("--plot", default=None, help="PNG of the FlashAttention-3-style sweep")
    parser.add_argument("--sweep", default="all", choices=("fa3", "cs336", "leaderboard", "all"))
    parser.add_argument("--quick", action="store_true", help="a handful of cases per sweep")
    parser.add_argument("--triton-tutorial", default=None, metavar="PATH",
                        help="Triton's python/tutorials/06-fused-attention.py, timed as 'triton'")
    parser.add_argument("--warmup", type=float, default=25, help="do_bench warm-up budget (ms)")
    parser.add_argument("--rep", type=float, default=100, help="do_bench timing budget (ms)")
    parser.add_argument("--tma-ab", action="store_true",
                        help="instead of the sweeps: the forward with knobs.tma off / on (and "
                        "warp-specialized) beside cuDNN, interleaved (attention_tma_ab.py)")
    parser.add_argument("--dtypes", default="float16",
                        help="--tma-ab's dtypes, comma-separated (float16,bfloat16)")
    parser.add_argument("--tma-ab-pass", default="fwd", choices=("fwd", "bwd", "both"),
                        help="--tma-ab's pass: the forward, the backward (dK/dV and dQ "
                        "kernels, TMA off / on and the fused dQ beside cuDNN's backward) "
                        "or both")
    args = parser.parse_args(argv)
    if args.warmup <= 0 or args.rep <= 0:
        parser.error("--warmup and --rep must be positive")
    return args


# ---- Tessera's attention (tessera.ops) and Triton's tutorial ----

@dataclass
class AttentionAPI:
    forward: Callable
    backward: Optional[Callable]
    attention: Optional[Callable]  # the torch.library op, differentiable
    notes: List[str]


def load_library() -> AttentionAPI:
    """attention_forward, attention_backward and attention (the torch.library op, registered
    on import) of tessera.ops."""
    from tessera.ops import attention, attention_backward, attention_forward
    return AttentionAPI(attention_forward, attention_backward, attention, [])


def load_triton_tutorial(path: str) -> Callable:
    """attention(q, k, v, causal, sm_scale) of Triton's own tutorial file (not installed as a
    module; its benchmark runs only under __main__)."""
    spec = importlib.util.spec_from_file_location("triton_fused_attention_tutorial", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.attention


# ---- Reference and providers (torch; any device) ----

def reference(q, k, v, do, causal: bool, budget: int = 2 ** 26):
    """(O, dQ, dK, dV) in float64 of softmax(q kᵀ / √D) v with output gradient do, for
    (B, H, S, D) tensors; score blocks of at most ``budget`` elements (heads, then query rows)."""
    import torch

    B, H, S, D = q.shape
    scale = D ** -0.5
    q, k, v, do = (x.detach().reshape(B * H, S, D).double() for x in (q, k, v, do))
    o, dq = torch.empty_like(q), torch.empty_like(q)
    dk, dv = torch.zeros_like(k), torch.zeros_like(v)
    heads = max(1, min(B * H, budget // (S * S)))
    rows = S if S * S <= budget else max(1, budget // S)
    for h in range(0, B * H, heads):
        hs = slice(h, h + heads)
        for r in range(0, S, rows):
            rs = slice(r, min(S, r + rows))
            scores = q[hs, rs] @ k[hs].transpose(1, 2) * scale
            if causal:
                i = torch.arange(rs.start, rs.stop, device=q.device)[:, None]
                scores.masked_fill_(torch.arange(S, device=q.device)[None, :] > i, -math.inf)
            p = torch.softmax(scores, dim=-1)
            o[hs, rs] = p @ v[hs]
            # dS = P ∘ (dO Vᵀ − rowsum(dO ∘ O)), times the scale of the scores.
            delta = (do[hs, rs] * o[hs, rs]).sum(-1, keepdim=True)
            ds = p * (do[hs, rs] @ v[hs].transpose(1, 2) - delta) * scale
            dq[hs, rs] = ds @ k[hs]
            dk[hs] += ds.transpose(1, 2) @ q[hs, rs]
            dv[hs] += p.transpose(1, 2) @ do[hs, rs]
    return tuple(x.reshape(B, H, S, D) for x in (o, dq, dk, dv))


def causal_mask(S: int, device):
    import torch
    return torch.ones((S, S), dtype=torch.bool, device=device).triu_(1)


def plain_attention(q, k, v, causal: bool, mask=None):
    """softmax(q kᵀ / √D) v in the input dtype, the full score matrix in memory (the way a
    student first writes it); ``mask``: True above the diagonal (causal_mask)."""
    import torch

    scores = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
    if causal:
        scores = scores.masked_fill_(mask if mask is not None else
                                     causal_mask(q.shape[-2], q.device), -math.inf)
    return torch.softmax(scores, dim=-1) @ v


def relative_error(out, ref) -> float:
    """‖out − ref‖ / ‖ref‖ against a float64 reference; inf when out is not finite."""
    import torch

    out = out.detach().double()
    if not bool(torch.isfinite(out).all()):
        return math.inf
    return float(torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref))


@dataclass
class Runner:
    """One provider on one case's inputs: forward() -> O; backward() -> (dQ, dK, dV) from a saved
    forward; forward_backward() -> (dQ, dK, dV); all run inside context(). The memory_ versions
    allocate their outputs as training code would (None: the timed ones already do)."""
    forward: Callable
    backward: Optional[Callable]
    forward_backward: Optional[Callable]
    context: Callable = contextlib.nullcontext
    memory_forward: Optional[Callable] = None
    memory_forward_backward: Optional[Callable] = None


def tessera_runner(api: AttentionAPI, q, k, v, do, causal: bool) -> Runner:
    """Tessera's wrappers writing into buffers allocated once (poisoned: an unwritten element
    fails the check)."""
    import torch

    o = torch.full_like(q, math.nan)
    lse = torch.full(q.shape[:3], math.nan, device=q.device, dtype=torch.float32)
    grads = [torch.full_like(q, math.nan) for _ in range(3)]

    def forward():
        return api.forward(q, k, v, causal, out=o, lse=lse)[0]

    def backward():
        return api.backward(q, k, v, o, lse, do, causal, dq=grads[0], dk=grads[1], dv=grads[2])

    def forward_backward():
        forward()
        return backward()

    def memory_forward_backward():
        o, lse = api.forward(q, k, v, causal)
        return api.backward(q, k, v, o, lse, do, causal)

    if api.backward is None:
        return Runner(forward, None, None, memory_forward=lambda: api.forward(q, k, v, causal))
    return Runner(forward, backward, forward_backward,
                  memory_forward=lambda: api.forward(q, k, v, causal),
                  memory_forward_backward=memory_forward_backward)


def autograd_runner(fn: Callable, q, k, v, do, context=contextlib.nullcontext) -> Runner:
    """A provider that is a differentiable fn(q, k, v) -> O; the forward runs without a graph."""
    import torch

    leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    saved = {}

    def backward():
        if "o" not in saved:
            saved["o"] = fn(*leaves)
        return torch.autograd.grad(saved["o"], leaves, do, retain_graph=True)

    def forward_backward():
        return torch.autograd.grad(fn(*leaves), leaves, do)

    return Runner(lambda: fn(q, k, v), backward, forward_backward, context)


@contextlib.contextmanager
def sdpa_backend(backend):
    from torch.nn.attention import sdpa_kernel
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "kernel not used because ..." for every unsupported case
        with sdpa_kernel(backend):
            yield


def make_providers(api: AttentionAPI, triton_attention: Optional[Callable]) -> Dict[str, Callable]:
    """name -> make(q, k, v, do, causal) -> Runner, for the providers available here."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend

    def sdpa(backend):
        def make(q, k, v, do, causal):
            def fn(q, k, v):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            return autograd_runner(fn, q, k, v, do, lambda: sdpa_backend(backend))
        return make

    def plain(q, k, v, do, causal):  # the mask, built once, counts as an input
        mask = causal_mask(q.shape[2], q.device) if causal else None
        return autograd_runner(lambda q, k, v: plain_attention(q, k, v, causal, mask), q, k, v, do)

    providers = {"tessera": lambda q, k, v, do, causal: tessera_runner(api, q, k, v, do, causal),
                 "flash": sdpa(SDPBackend.FLASH_ATTENTION)}
    if hasattr(SDPBackend, "CUDNN_ATTENTION"):
        providers["cudnn"] = sdpa(SDPBackend.CUDNN_ATTENTION)
    providers["efficient"] = sdpa(SDPBackend.EFFICIENT_ATTENTION)
    if triton_attention is not None:
        providers["triton"] = lambda q, k, v, do, causal: autograd_runner(
            lambda q, k, v: triton_attention(q, k, v, causal, q.shape[-1] ** -0.5), q, k, v, do)
    providers["plain"] = plain
    return providers


# ---- Measuring ----

def free_memory() -> None:
    import torch
    gc.collect()
    torch.cuda.empty_cache()


def reason_of(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:160]}" if text else type(exc).__name__


def run_pass(fn: Optional[Callable], expected: Sequence, flops: float, bound: float,
             timing: Tuple[float, float]) -> dict:
    """Checks fn's outputs against ``expected`` (float64), then times it."""
    import torch
    from tessera.testing import do_bench

    if fn is None:
        return failed("n/a", "no such pass")
    try:
        got = fn()
        got = got if isinstance(got, (tuple, list)) else (got,)
        torch.cuda.synchronize()
        error = max(relative_error(g, e) for g, e in zip(got, expected, strict=True))
        del got
        ms = do_bench(fn, warmup=timing[0], rep=timing[1], return_mode="median")
        return measured(ms, flops, error, bound)
    except Exception as exc:  # OOM, unsupported case or a broken kernel: recorded, not raised
        return failed(classify(exc), reason_of(exc))


def peak_bytes(fn: Optional[Callable]) -> dict:
    """Peak allocated bytes of fn() beyond what was allocated before (the inputs)."""
    import torch

    if fn is None:
        return failed("n/a", "no such pass")
    try:  # a first call compiles and autotunes: the tuner's timing buffers are not fn's
        fn()
    except Exception as exc:
        free_memory()
        return {"status": classify(exc), "bytes": None, "reason": reason_of(exc)}
    free_memory()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    try:
        out = fn()
        torch.cuda.synchronize()
        result = {"status": "ok", "bytes": torch.cuda.max_memory_allocated() - base}
        del out
    except Exception as exc:
        result = {"status": classify(exc), "bytes": None, "reason": reason_of(exc)}
    free_memory()
    return result


def measure_provider(make: Callable, inputs: Sequence, ref: Sequence, case: dict,
                     timing: Tuple[float, float], memory: bool) -> Tuple[dict, dict]:
    """({pass: result}, {pass: peak memory}) of one provider on one case; the later passes are
    skipped when the forward cannot run at all."""
    shape = (case["B"], case["H"], case["S"], case["D"], case["causal"])
    bound = BOUNDS[case["dtype"]]
    try:
        runner = make(*inputs, case["causal"])
    except Exception as exc:
        return {p: failed(classify(exc), reason_of(exc)) for p in PASSES}, {}
    results, peaks = {}, {}
    with runner.context():
        if memory:  # first, while no saved graph or timing buffer of this provider is alive
            peaks["fwd"] = peak_bytes(runner.memory_forward or runner.forward)
            peaks["fwd_bwd"] = peak_bytes(runner.memory_forward_backward
                                          or runner.forward_backward)
        results["fwd"] = run_pass(runner.forward, ref[:1], attention_flops(*shape, "fwd"), bound,
                                  timing)
        for name, fn in (("bwd", runner.backward), ("fwd_bwd", runner.forward_backward)):
            if results["fwd"]["status"] in ("OOM", "n/a"):
                results[name] = dict(results["fwd"])
            else:
                results[name] = run_pass(fn, ref[1:], attention_flops(*shape, name),
                                         bound * GRAD_BOUND_FACTOR, timing)
    del runner
    free_memory()
    return results, peaks


def measure_case(case: dict, providers: Dict[str, Callable], timing: Tuple[float, float],
                 memory: bool = False) -> dict:
    """Fresh inputs, their float64 reference, then every provider on them."""
    import torch

    row = dict(case, results={}, memory={})
    try:
        dtype = getattr(torch, case["dtype"])
        shape = (case["B"], case["H"], case["S"], case["D"])
        inputs = [torch.randn(shape, device=DEVICE, dtype=dtype) for _ in range(4)]  # q k v dO
        ref = reference(*inputs, case["causal"])
        for name, make in providers.items():
            results, peaks = measure_provider(make, inputs, ref, case, timing, memory)
            row["results"][name] = results
            if memory:
                row["memory"][name] = peaks
    except Exception as exc:  # the case itself (inputs, reference) did not fit: keep going
        row["reason"] = reason_of(exc)
    free_memory()
    return row


def leaderboard(api: AttentionAPI, quick: bool, shape: Tuple[int, int, int] = LEADERBOARD_SHAPE
                ) -> dict:
    """The CS336 leaderboard flow: torch.compile of the differentiable function on (N, S, D)
    inputs (heads folded into the batch, as the leaderboard's FlashAttention2.apply takes them),
    o.sum().backward() timed by do_bench (mean, gradients accumulating as there)."""
    import torch
    from tessera.testing import do_bench

    if api.attention is None:
        return failed("n/a", "no torch integration (tessera.ops.attention)")
    q, k, v = (torch.randn(shape, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))

    def flash(q, k, v):  # (N, S, D) as (N, 1, S, D): our (B, H, S, D)
        return api.attention(q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1),
                             causal=True).squeeze(1)

    def step(compiled):
        o = compiled(q, k, v)
        o.sum().backward()
        return o

    notes = []
    try:
        compiled = torch.compile(flash, fullgraph=True, backend=COMPILE_BACKEND)
        step(compiled)
    except Exception as exc:
        notes.append(f"fullgraph=True failed ({reason_of(exc)}); timed with graph breaks")
        torch._dynamo.reset()
        compiled = torch.compile(flash, backend=COMPILE_BACKEND)
        try:
            step(compiled)
        except Exception as exc2:
            return dict(failed(classify(exc2), reason_of(exc2)), notes=notes)
    for x in (q, k, v):
        x.grad = None
    o = step(compiled)
    ref = reference(*(x.unsqueeze(1) for x in (q, k, v, torch.ones_like(q))), causal=True)
    got = (o, q.grad, k.grad, v.grad)
    errors = [relative_error(g.unsqueeze(1), r) for g, r in zip(got, ref, strict=True)]
    del o, got, ref
    free_memory()
    warmup, rep = (100, 1000) if quick else (1000, 10000)  # the leaderboard's do_bench budgets
    times = do_bench(lambda: step(compiled), warmup=warmup, rep=rep, return_mode="all")
    error = max(errors[0] / BOUNDS["bfloat16"], max(errors[1:]) /
                (BOUNDS["bfloat16"] * GRAD_BOUND_FACTOR))  # in units of the bounds
    return {"status": "ok" if error <= 1 else "wrong", "mean_ms": sum(times) / len(times),
            "median_ms": sorted(times)[len(times) // 2], "runs": len(times),
            "errors": {"o": errors[0], "dq": errors[1], "dk": errors[2], "dv": errors[3]},
            "error": max(errors), "best_published_ms": LEADERBOARD_BEST_MS, "notes": notes}


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        sys.exit("benchmarks/attention.py: needs a CUDA GPU")
    api = load_library()
    triton_attention = None
    if args.triton_tutorial:
        try:
            triton_attention = load_triton_tutorial(args.triton_tutorial)
        except Exception as exc:
            api.notes.append(f"triton: {args.triton_tutorial} did not load: {reason_of(exc)}")
    else:
        api.notes.append("triton: Triton's tutorial is not an installed module; pass "
                         "--triton-tutorial PATH to time it")
    providers = make_providers(api, triton_attention)
    timing = (args.warmup, args.rep)
    report = {"benchmark": "attention", "device": torch.cuda.get_device_name(),
              "torch": torch.__version__, "args": vars(args), "notes": api.notes,
              "fa3": [], "cs336": [], "leaderboard": None}

    def save() -> None:  # after every case, so that a run cut short keeps what it measured
        if args.json:
            with open(args.json, "w") as f:
                json.dump(jsonable(report), f, indent=1, allow_nan=False)

    def progress(row: dict) -> None:
        res = row["results"].get("tessera", {})
        print(f"  {row['dtype']} S={row['S']} D={row['D']} causal={row['causal']}: tessera "
              + " ".join(f"{p} {cell(res.get(p), 'ms', digits=3)} ms" for p in PASSES)
              + (f"  [{row['reason']}]" if row.get("reason") else ""), flush=True)

    if args.tma_ab:
        tma_ab(args, report, save)
        return
    sweeps = ("fa3", "cs336", "leaderboard") if args.sweep == "all" else (args.sweep,)
    if "fa3" in sweeps:
        print("FlashAttention-3-style sweep", flush=True)
        for case in fa3_cases(args.quick):
            report["fa3"].append(measure_case(case, providers, timing))
            progress(report["fa3"][-1])
            save()
    if "cs336" in sweeps:
        print("CS336 sweep", flush=True)
        pair = {name: providers[name] for name in ("tessera", "plain")}
        for case in cs336_cases(args.quick):
            report["cs336"].append(measure_case(case, pair, timing, memory=True))
            progress(report["cs336"][-1])
            save()
    if "leaderboard" in sweeps:
        print("CS336 leaderboard case", flush=True)
        try:
            report["leaderboard"] = leaderboard(api, args.quick)
        except Exception as exc:
            report["leaderboard"] = failed(classify(exc), reason_of(exc))
        save()
    if args.plot and report["fa3"]:
        try:
            plot_fa3(report["fa3"], args.plot)
        except Exception as exc:  # matplotlib missing or too old: the numbers are in the JSON
            report["notes"].append(f"no plot: {reason_of(exc)}")
    print_report(report)


def tma_ab(args: argparse.Namespace, report: dict, save: Callable[[], None]) -> None:
    """--tma-ab: attention_tma_ab.py's rows (report["tma_ab"]) and their table."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import attention_tma_ab

    report["tma_ab"] = []

    def progress(row: dict) -> None:
        report["tma_ab"].append(row)
        print(f"  {row.get('pass_name', 'fwd')} {row['dtype']} S={row['S']} D={row['D']} "
              f"causal={row['causal']}: "
              + " ".join(f"{n} {row[n + '_ms']:.3f} ms"
                         for n in ("tma_off", "tma_on", "tma_ws", "fused_dq", "cudnn")
                         if n + "_ms" in row), flush=True)
        save()

    passes = ("fwd", "bwd") if args.tma_ab_pass == "both" else (args.tma_ab_pass,)
    attention_tma_ab.run(args.quick, args.dtypes.split(","), reference, relative_error, BOUNDS,
                         progress, passes)
    forward = [r for r in report["tma_ab"] if r.get("pass_name", "fwd") == "fwd"]
    backward = [r for r in report["tma_ab"] if r.get("pass_name") == "bwd"]
    if forward:
        print("\nforward\n" + attention_tma_ab.table(forward))
    if backward:
        print("\nbackward\n" + attention_tma_ab.backward_table(backward))


def print_report(report: dict) -> None:
    print(f"\nattention on {report['device']} (torch {report['torch']}); WRONG = error above "
          "the bound, n/a = not supported, OOM = out of memory")
    if report["fa3"]:
        for pass_name in PASSES:
            print("\n" + fa3_table(report["fa3"], pass_name))
    if report["cs336"]:
        print("\n" + cs336_table(report["cs336"]))
    if report["leaderboard"] is not None:
        print("\n" + leaderboard_line(report["leaderboard"]))
    notes = report["notes"] + failure_notes(report["fa3"] + report["cs336"])
    print("\nnotes:\n" + "\n".join(f"  {n}" for n in notes))


if __name__ == "__main__":
    main()
