"""Masked attention with a learnable bias (tessera.ops.attention_masked) against PyTorch SDPA
with the mask materialized as an additive float mask (memory-efficient and math backends,
cuDNN where it takes one) and FlexAttention (torch.compile'd flex_attention: a score_mod that
reads the bias, a block_mask built from the same bool mask), forward and backward (dq, dk, dv
and dbias), with peak memory.

Masks (all (1, 1, S, S) bool, shared by batch and heads): "dense" (all true), "document"
(causal within documents of S/8 keys), "window" (|i - j| < 512), "sparse10" (10% of the
128-blocks live, random). Bias: a learned per-head key bias (1, H, 1, S), requires grad.
Tokens per case: 32k (B = 32768 / S), H = 16 (D = 64) or 8 (D = 128).

Method: fresh random inputs per case; each provider's output and gradients are compared with
Tessera's (relative error; a difference above 2e-2 prints WRONG); Tessera is checked against
float64 on one head at the smallest S. Timing: tessera.testing.do_bench (CUDA events, L2
flushed, mean). Peak memory: torch.cuda.max_memory_allocated after reset_peak_memory_stats,
minus what the inputs take. Out of memory prints OOM; unsupported cases n/a (reason in the
JSON). --report prints tessera.report of the forward for the config its autotuner picked.

    python3 benchmarks/attention_masked.py --quick --json OUT.json    # < 3 minutes
    python3 benchmarks/attention_masked.py                            # S = 4k-32k, D = 64, 128
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Callable, Dict, Optional, Sequence

TOKENS = 32768
SEQS = (4096, 8192, 16384, 32768)
DIMS = (64, 128)
MASKS = ("dense", "document", "window", "sparse10")
QUICK = ((4096, 64, "sparse10"), (4096, 128, "document"), (16384, 128, "window"),
         (8192, 64, "dense"))
PROVIDERS = ("tessera", "flex", "efficient", "cudnn", "math")
PASSES = ("fwd", "bwd")


def make_mask(torch, kind: str, S: int, gen):
    i = torch.arange(S, device="cuda")
    if kind == "dense":
        return torch.ones((1, 1, S, S), dtype=torch.bool, device="cuda")
    if kind == "document":
        doc = i // (S // 8)
        return ((doc[:, None] == doc[None, :]) & (i[None, :] <= i[:, None]))[None, None]
    if kind == "window":
        return ((i[:, None] - i[None, :]).abs() < 512)[None, None]
    blocks = torch.rand((S // 128, S // 128), generator=gen, device="cuda") < 0.1
    return blocks.repeat_interleave(128, 0).repeat_interleave(128, 1)[None, None]


def providers(torch, q, k, v, mask, bias) -> Dict[str, Callable]:
    """name -> a function running the forward (returning o), for the inputs given."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F
    from tessera.ops import attention_masked

    def sdpa(backend):
        def run():
            additive = bias.expand(1, -1, mask.shape[2], -1).masked_fill(~mask, float("-inf"))
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, attn_mask=additive)
        return run

    def flex():
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        dense = mask[0, 0]

        def mask_mod(b, h, q_idx, kv_idx):
            return dense[q_idx, kv_idx]

        def score_mod(score, b, h, q_idx, kv_idx):
            return score + bias[0, h, 0, kv_idx]

        block_mask = create_block_mask(mask_mod, None, None, q.shape[2], k.shape[2],
                                       device="cuda")
        compiled = torch.compile(flex_attention)
        return lambda: compiled(q, k, v, score_mod=score_mod, block_mask=block_mask)

    return {"tessera": lambda: attention_masked(q, k, v, mask=mask, bias=bias),
            "flex": flex, "efficient": sdpa(SDPBackend.EFFICIENT_ATTENTION),
            "cudnn": sdpa(SDPBackend.CUDNN_ATTENTION), "math": sdpa(SDPBackend.MATH)}


def rel(x, ref) -> float:
    return ((x.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30)).item()


def run_case(torch, S: int, D: int, kind: str, args) -> dict:
    from tessera.testing import do_bench
    gen = torch.Generator(device="cuda").manual_seed(S + D)
    B, H = TOKENS // S, 16 if D == 64 else 8
    q, k, v = (torch.randn((B, H, S, D), generator=gen, device="cuda", dtype=torch.bfloat16,
                           requires_grad=True) for _ in range(3))
    bias = (torch.randn((1, H, 1, S), generator=gen, device="cuda") * 0.5).to(
        torch.bfloat16).requires_grad_()
    mask = make_mask(torch, kind, S, gen)
    do = torch.randn((B, H, S, D), generator=gen, device="cuda", dtype=torch.bfloat16)
    inputs = (q, k, v, bias)
    row = {"S": S, "D": D, "B": B, "H": H, "mask": kind, "ms": {}, "peak_mb": {},
           "error": {}, "notes": {}}
    reference = None
    base = torch.cuda.memory_allocated()
    for name, make in providers(torch, q, k, v, mask, bias).items():
        if name not in args.providers:
            continue
        try:
            fn = make() if name == "flex" else make
            for x in inputs:
                x.grad = None
            torch.cuda.reset_peak_memory_stats()
            o = fn()
            grads = torch.autograd.grad(o, inputs, do)
            row["peak_mb"][name] = (torch.cuda.max_memory_allocated() - base) / 2 ** 20
            if reference is None:
                reference = (o.detach(), grads)
            else:
                row["error"][name] = max(rel(o, reference[0]),
                                         *(rel(g, r) for g, r in zip(grads, reference[1])))
            del o, grads
            forward = do_bench(fn, warmup=args.warmup, rep=args.rep)

            def both():
                torch.autograd.grad(fn(), inputs, do)
            row["ms"][name] = {"fwd": forward,
                               "bwd": do_bench(both, warmup=args.warmup, rep=args.rep) - forward}
        except torch.cuda.OutOfMemoryError:
            row["notes"][name] = "OOM"
        except Exception as error:  # a backend that does not take this case
            row["notes"][name] = f"n/a: {type(error).__name__}: {str(error)[:200]}"
        torch.cuda.empty_cache()
    if args.report:
        report_forward(torch, q, k, v, mask, bias)
    return row


def report_forward(torch, q, k, v, mask, bias) -> None:
    """tessera.report of the forward for the config its autotuner picks for these inputs."""
    from tessera.ops.masked_attention.blocks import block_table
    from tessera.ops.masked_attention.forward import _tuned_fwd, forward_launch
    from tessera.ops.masked_attention.model import model
    with torch.no_grad():
        out = torch.empty_like(q)
        lse = torch.empty(q.shape[:3], device="cuda", dtype=torch.float32)
        grid, launch_args, kwargs = forward_launch(q, k, v, mask, bias, False, None, out, lse)
        moved, flops = model(q, k, block_table(mask, tuple(q.shape), k.shape[2], False), mask,
                             bias)
        _tuned_fwd.report(*launch_args, grid=grid, bytes=moved, flops=flops, **kwargs)


def print_table(rows: Sequence[dict]) -> None:
    for pass_name in PASSES:
        print(f"\n{pass_name} (ms; speed-up of Tessera over each; peak MB of fwd+bwd)")
        print(f"{'S':>6} {'D':>4} {'mask':>9} " + " ".join(f"{p:>17}" for p in PROVIDERS))
        for row in rows:
            cells = []
            for name in PROVIDERS:
                if name in row["ms"]:
                    ms = row["ms"][name][pass_name]
                    wrong = row["error"].get(name, 0) > 2e-2
                    cells.append(f"{'WRONG' if wrong else f'{ms:.2f}'}"
                                 f" /{row['peak_mb'][name]:.0f}MB")
                else:
                    cells.append(row["notes"].get(name, "-")[:6])
            print(f"{row['S']:>6} {row['D']:>4} {row['mask']:>9} "
                  + " ".join(f"{c:>17}" for c in cells))


def check_float64(torch) -> float:
    """Tessera against float64 on one small case (a document mask and the bias)."""
    from tessera.ops import attention_masked
    gen = torch.Generator(device="cuda").manual_seed(0)
    S, D = 1024, 64
    q, k, v = (torch.randn((1, 2, S, D), generator=gen, device="cuda", dtype=torch.bfloat16)
               for _ in range(3))
    bias = torch.randn((1, 2, 1, S), generator=gen, device="cuda").to(torch.bfloat16)
    mask = make_mask(torch, "document", S, gen)
    o = attention_masked(q, k, v, mask=mask, bias=bias)
    s = q.double() @ k.double().transpose(-1, -2) / math.sqrt(D) + bias.double()
    ref = torch.softmax(s.masked_fill(~mask, float("-inf")), -1) @ v.double()
    return rel(o, ref)


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="4 cases, under 3 minutes")
    parser.add_argument("--json", default=None, help="write every number to this file")
    parser.add_argument("--report", action="store_true", help="tessera.report per case")
    parser.add_argument("--providers", default=",".join(PROVIDERS))
    parser.add_argument("--warmup", type=float, default=10)
    parser.add_argument("--rep", type=float, default=50)
    args = parser.parse_args(argv)
    args.providers = args.providers.split(",")
    import torch
    if not torch.cuda.is_available():
        sys.exit("attention_masked.py needs a CUDA GPU")
    error = check_float64(torch)
    print(f"{torch.cuda.get_device_name()}: Tessera vs float64 (S=1024, document mask, bias): "
          f"{error:.2e}{' WRONG' if error > 1e-2 else ''}")
    cases = QUICK if args.quick else [(S, D, m) for S in SEQS for D in DIMS for m in MASKS]
    rows = []
    for S, D, kind in cases:
        rows.append(run_case(torch, S, D, kind, args))
        print(f"S={S} D={D} {kind}: " + ", ".join(
            f"{n} {r['fwd']:.2f}/{r['bwd']:.2f} ms" for n, r in rows[-1]["ms"].items()),
            flush=True)
    print_table(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "float64_error": error,
                       "cases": rows}, f, indent=1)


if __name__ == "__main__":
    main()
