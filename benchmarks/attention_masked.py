"""Masked attention with a learnable bias (tessera.ops.attention_masked) against FlexAttention
(torch.compile'd flex_attention, Triton backend), PyTorch SDPA with the mask materialized as an
additive float mask (cuDNN, memory-efficient, math) and, at the all-true mask, the dense
tessera.ops.attention; forward and backward (dq, dk, dv, dbias) timed apart, with peak memory.

Masks (all (1, 1, S, S) bool, shared by batch and heads): "dense" (all true), "document"
(causal within documents of S/8 keys), "window" (|i - j| < 512), "sparse10" (10% of the
128-blocks live, random). Bias: a learned per-head key bias (1, H, 1, S), requires grad.
Tokens per case: 32k (B = 32768 / S), H = 16 (D = 64) or 8 (D = 128), bfloat16.

Providers, each set up once outside the timing, as FlexAttention's own benchmarks do:
- tessera: attention_masked(q, k, v, mask, bias). Its live-tile table (which 128 x 128 tiles
  are empty, partial or all-live) is built on the first call and kept with the mask, as a
  BlockMask is: "table" in the JSON is what building it costs (once per mask).
- tessera_nobias (all-true mask only): the same without the bias, the like-for-like of dense.
- dense (all-true mask only): tessera.ops.attention, no mask, no bias.
- flex: torch.compile(flex_attention, dynamic=False), compiled and warmed up before timing;
  the BlockMask built once by create_block_mask from the mask itself (its real block
  structure; BLOCK_SIZE 128); score_mod adds the bias (a captured buffer, gradient to it).
- cudnn, efficient, math: SDPA with attn_mask = bias + (-inf where masked), built inside the
  timed call (a learnable bias must flow into the float mask each step: that is their cost).

Method: fresh random inputs per case; each provider's output and gradients are compared with
Tessera's (relative error; above 2e-2 prints WRONG); Tessera is checked against float64 on
one head. Timing: tessera.testing.do_bench (CUDA events, L2 flushed, mean); forward alone,
then the backward alone (torch.autograd.grad with retain_graph on one forward's graph).
Peak memory: torch.cuda.max_memory_allocated after reset_peak_memory_stats, minus what was
allocated before, for the forward and for forward + backward. A provider slower than the math
backend gets a note (an unfused fallback would do that). Out of memory prints OOM;
unsupported cases n/a (reason in the JSON). The ratios print after the tables.

    python3 benchmarks/attention_masked.py --quick --json OUT.json    # about 3 minutes
    python3 benchmarks/attention_masked.py                            # S = 4k-32k, D = 64, 128
    python3 benchmarks/attention_masked.py --tma-ab --quick --json OUT.json
        # fwd and bwd with TESSERA_ATTENTION_TMA off / on beside Flex, alternating rounds
        # (attention_masked_tma_ab.py; sm_90a)
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
         (8192, 64, "dense"), (8192, 128, "dense"), (8192, 128, "sparse10"))
PROVIDERS = ("tessera", "tessera_nobias", "dense", "flex", "cudnn", "efficient", "math")
ONLY_DENSE = ("tessera_nobias", "dense")  # providers run at the all-true mask only
PASSES = ("fwd", "bwd")
DEVICE = "cuda"


def make_mask(torch, kind: str, S: int, gen):
    i = torch.arange(S, device=DEVICE)
    if kind == "dense":
        return torch.ones((1, 1, S, S), dtype=torch.bool, device=DEVICE)
    if kind == "document":
        doc = i // (S // 8)
        return ((doc[:, None] == doc[None, :]) & (i[None, :] <= i[:, None]))[None, None]
    if kind == "window":
        return ((i[:, None] - i[None, :]).abs() < 512)[None, None]
    blocks = torch.rand((S // 128, S // 128), generator=gen, device=DEVICE) < 0.1
    return blocks.repeat_interleave(128, 0).repeat_interleave(128, 1)[None, None]


def flex_setup(torch, q, mask, bias) -> Callable:
    """flex_attention compiled once and a BlockMask built once from `mask` (outside timing)."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    dense = mask[0, 0]

    def mask_mod(b, h, q_idx, kv_idx):
        return dense[q_idx, kv_idx]

    def score_mod(score, b, h, q_idx, kv_idx):
        return score + bias[0, h, 0, kv_idx]

    block_mask = create_block_mask(mask_mod, None, None, q.shape[2], q.shape[2],
                                   device=q.device, BLOCK_SIZE=128)
    compiled = torch.compile(flex_attention, dynamic=False)
    return lambda q, k, v: compiled(q, k, v, score_mod=score_mod, block_mask=block_mask)


def providers(torch, q, mask, bias, kind: str) -> Dict[str, Callable]:
    """name -> setup() returning a function of (q, k, v) that runs the forward."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F
    from tessera.ops import attention, attention_masked

    def sdpa(backend):
        def run(q, k, v):
            additive = bias.expand(1, -1, mask.shape[2], -1).masked_fill(~mask, float("-inf"))
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, attn_mask=additive)
        return lambda: run

    found = {"tessera": lambda: (lambda q, k, v: attention_masked(q, k, v, mask=mask,
                                                                  bias=bias)),
             "tessera_nobias": lambda: (lambda q, k, v: attention_masked(q, k, v, mask=mask)),
             "dense": lambda: attention,
             "flex": lambda: flex_setup(torch, q, mask, bias),
             "cudnn": sdpa(SDPBackend.CUDNN_ATTENTION),
             "efficient": sdpa(SDPBackend.EFFICIENT_ATTENTION), "math": sdpa(SDPBackend.MATH)}
    return {name: make for name, make in found.items()
            if kind == "dense" or name not in ONLY_DENSE}


def rel(x, ref) -> float:
    return ((x.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30)).item()


def table_ms(torch, mask, q) -> float:
    """What building Tessera's live-tile table and lists costs (once per mask)."""
    from tessera.ops.masked_attention import blocks
    from tessera.testing import do_bench
    return do_bench(lambda: blocks._lists(blocks.block_table(mask, tuple(q.shape), q.shape[2],
                                                             False)), warmup=5, rep=20)


def measure(torch, fn, inputs, do, args) -> dict:
    """Peak memory and times of one provider: forward, then backward alone."""
    from tessera.testing import do_bench
    q, k, v = inputs[:3]
    base = torch.cuda.memory_allocated()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    o = fn(q, k, v)
    torch.cuda.synchronize()
    fwd_peak = torch.cuda.max_memory_allocated() - base
    grads = torch.autograd.grad(o, inputs, do, retain_graph=True, allow_unused=True)
    if any(g is None for g in grads):
        raise RuntimeError("no gradient reaches the bias")
    torch.cuda.synchronize()
    both_peak = torch.cuda.max_memory_allocated() - base
    ms = {"fwd": do_bench(lambda: fn(q, k, v), warmup=args.warmup, rep=args.rep),
          "bwd": do_bench(lambda: torch.autograd.grad(o, inputs, do, retain_graph=True),
                          warmup=args.warmup, rep=args.rep)}
    return {"o": o.detach(), "grads": grads, "ms": ms,
            "peak_mb": {"fwd": fwd_peak / 2 ** 20, "fwd_bwd": both_peak / 2 ** 20}}


def run_case(torch, S: int, D: int, kind: str, args) -> dict:
    gen = torch.Generator(device=DEVICE).manual_seed(S + D)
    B, H = TOKENS // S, 16 if D == 64 else 8
    q, k, v = (torch.randn((B, H, S, D), generator=gen, device=DEVICE, dtype=torch.bfloat16,
                           requires_grad=True) for _ in range(3))
    bias = (torch.randn((1, H, 1, S), generator=gen, device=DEVICE) * 0.5).to(
        torch.bfloat16).requires_grad_()
    mask = make_mask(torch, kind, S, gen)
    do = torch.randn((B, H, S, D), generator=gen, device=DEVICE, dtype=torch.bfloat16)
    row = {"S": S, "D": D, "B": B, "H": H, "mask": kind, "ms": {}, "peak_mb": {},
           "error": {}, "notes": {}, "table_ms": table_ms(torch, mask, q)}
    references: dict = {}  # with bias / without: the first provider of each is the reference
    for name, setup in providers(torch, q, mask, bias, kind).items():
        if name not in args.providers:
            continue
        inputs = (q, k, v) if name in ONLY_DENSE else (q, k, v, bias)
        try:
            fn = setup()
            fn(q, k, v)  # compiles (flex: torch.compile, Tessera: the kernels) before timing
            result = measure(torch, fn, inputs, do, args)
            row["ms"][name], row["peak_mb"][name] = result["ms"], result["peak_mb"]
            reference = references.setdefault(len(inputs), (result["o"], result["grads"]))
            if reference[0] is not result["o"]:
                row["error"][name] = max(rel(result["o"], reference[0]), *(
                    rel(g, r) for g, r in zip(result["grads"], reference[1])))
            del result
        except torch.cuda.OutOfMemoryError:
            row["notes"][name] = "OOM"
        except Exception as error:  # a backend that does not take this case
            row["notes"][name] = f"n/a: {type(error).__name__}: {str(error)[:200]}"
        torch.cuda.empty_cache()
    flag_slower_than_math(row)
    return row


def flag_slower_than_math(row: dict) -> None:
    """A note on every provider slower than the math backend (materializes S x S scores)."""
    math_ms = row["ms"].get("math")
    for name, ms in row["ms"].items():
        for pass_name in PASSES:
            if math_ms and name != "math" and ms[pass_name] > math_ms[pass_name]:
                row["notes"][name] = (f"{pass_name} slower than the math backend "
                                      f"({ms[pass_name]:.2f} > {math_ms[pass_name]:.2f} ms)")


def ratios(row: dict) -> dict:
    """Tessera's time over each reference's, per pass (< 1: Tessera faster)."""
    out = {}
    tessera = row["ms"].get("tessera")
    for other in ("flex", "cudnn", "dense"):
        mine = row["ms"].get("tessera_nobias" if other == "dense" else "tessera")
        if mine and other in row["ms"]:
            out[f"vs_{other}"] = {p: mine[p] / row["ms"][other][p] for p in PASSES}
    if tessera and "dense" in row["ms"]:
        out["bias_vs_dense"] = {p: tessera[p] / row["ms"]["dense"][p] for p in PASSES}
    return out


def sparse_ratios(rows: Sequence[dict]) -> list:
    """(S, D, sparse10 / dense fwd+bwd) for every (S, D) run with both masks."""
    found = {(r["S"], r["D"], r["mask"]): r for r in rows if "tessera" in r["ms"]}
    out = []
    for (S, D, kind), row in found.items():
        dense = found.get((S, D, "dense"))
        if kind == "sparse10" and dense:
            total = lambda r: sum(r["ms"]["tessera"].values())  # noqa: E731
            out.append((S, D, total(row) / total(dense)))
    return out


def print_table(rows: Sequence[dict]) -> None:
    for pass_name in PASSES:
        print(f"\n{pass_name} (ms / peak MB of {'fwd' if pass_name == 'fwd' else 'fwd+bwd'})")
        print(f"{'S':>6} {'D':>4} {'mask':>9} " + " ".join(f"{p[:14]:>14}" for p in PROVIDERS))
        for row in rows:
            cells = []
            for name in PROVIDERS:
                if name in row["ms"]:
                    wrong = row["error"].get(name, 0) > 2e-2
                    peak = row["peak_mb"][name]["fwd" if pass_name == "fwd" else "fwd_bwd"]
                    ms = row["ms"][name][pass_name]
                    cells.append(f"{'WRONG' if wrong else f'{ms:.2f}'}/{peak:.0f}")
                else:
                    cells.append(row["notes"].get(name, "-")[:6])
            print(f"{row['S']:>6} {row['D']:>4} {row['mask']:>9} "
                  + " ".join(f"{c:>14}" for c in cells))
    print("\nTessera's time over each (fwd, bwd; < 1 is faster), its table build (once per mask)")
    for row in rows:
        parts = [f"{name} {r['fwd']:.2f}, {r['bwd']:.2f}" for name, r in ratios(row).items()]
        print(f"S={row['S']} D={row['D']} {row['mask']}: " + "; ".join(parts)
              + f"; table {row['table_ms']:.3f} ms")
    for S, D, ratio in sparse_ratios(rows):
        print(f"S={S} D={D}: 10%-live blocks take {ratio:.2f}x of all-live (fwd+bwd)")
    for row in rows:
        for name, note in row["notes"].items():
            print(f"note S={row['S']} D={row['D']} {row['mask']} {name}: {note}")


def check_float64(torch) -> float:
    """Tessera against float64 on one small case (a document mask and the bias)."""
    from tessera.ops import attention_masked
    gen = torch.Generator(device=DEVICE).manual_seed(0)
    S, D = 1024, 64
    q, k, v = (torch.randn((1, 2, S, D), generator=gen, device=DEVICE, dtype=torch.bfloat16)
               for _ in range(3))
    bias = torch.randn((1, 2, 1, S), generator=gen, device=DEVICE).to(torch.bfloat16)
    mask = make_mask(torch, "document", S, gen)
    o = attention_masked(q, k, v, mask=mask, bias=bias)
    s = q.double() @ k.double().transpose(-1, -2) / math.sqrt(D) + bias.double()
    ref = torch.softmax(s.masked_fill(~mask, float("-inf")), -1) @ v.double()
    return rel(o, ref)


def parse(argv: Optional[Sequence[str]] = None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="6 cases, about 3 minutes")
    parser.add_argument("--json", default=None, help="write every number to this file")
    parser.add_argument("--providers", default=",".join(PROVIDERS))
    parser.add_argument("--warmup", type=float, default=10)
    parser.add_argument("--rep", type=float, default=50)
    parser.add_argument("--tma-ab", action="store_true",
                        help="instead of the tables: forward and backward with "
                        "TESSERA_ATTENTION_TMA off / on beside Flex, interleaved "
                        "(attention_masked_tma_ab.py)")
    args = parser.parse_args(argv)
    args.providers = args.providers.split(",")
    return args


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse(argv)
    import torch
    if not torch.cuda.is_available():
        sys.exit("attention_masked.py needs a CUDA GPU")
    error = check_float64(torch)
    print(f"{torch.cuda.get_device_name()}: Tessera vs float64 (S=1024, document mask, bias): "
          f"{error:.2e}{' WRONG' if error > 1e-2 else ''}")
    cases = QUICK if args.quick else [(S, D, m) for S in SEQS for D in DIMS for m in MASKS]
    if args.tma_ab:
        tma_ab(torch, cases, args)
        return
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
                       "cases": [{**row, "ratios": ratios(row)} for row in rows],
                       "sparse_over_dense": sparse_ratios(rows)}, f, indent=1)


def tma_ab(torch, cases, args) -> None:
    """--tma-ab: attention_masked_tma_ab.py's rows for `cases` and their table."""
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    import attention_masked_tma_ab
    rows = []
    for S, D, kind in cases:
        for row in attention_masked_tma_ab.measure(torch, S, D, kind, make_mask, flex_setup,
                                                   rel, TOKENS):
            rows.append(row)
            print(f"S={S} D={D} {kind} {row['provider']} {row['pass_name']}: off "
                  f"{row['tma_off_ms']:.3f} ms, on "
                  f"{row['tma_on_ms']:.3f} ms ({row['tma_on_path']}), flex "
                  f"{row.get('flex_ms', math.nan):.3f} ms", flush=True)
    print("\nTESSERA_ATTENTION_TMA off / on\n" + attention_masked_tma_ab.table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "tma_ab": rows}, f, indent=1)


if __name__ == "__main__":
    main()
