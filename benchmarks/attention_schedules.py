"""The attention forward's step schedules on Hopper, each at a forced tile, against cuDNN in the
same run: the plain loop (Q Kᵀ, softmax, P V in turn); "carry", the plain loop with
TESSERA_WGMMA_CARRY_RESCALED (P V left in flight across the back edge, retired by the next
step's wait after its Q Kᵀ, the copies after the last product: Triton's loop; on rings of
three slots or more, two-slot ones keep the wait); OVERLAP (P V
of one tile issued right after Q Kᵀ of the next, the softmax of the next running while P V
holds the tensor cores: FlashAttention-3's order inside a warpgroup); and OVERLAP with
TESSERA_PINGPONG (the two warpgroups take turns at issuing each step's products:
FlashAttention-3's ping-pong). docs/perf/attention_tma.md, "The forward against cuDNN".

Method: the TMA path's kernel (host descriptors) launched with each schedule at each tile,
checked against cuDNN's output (max abs error < 2e-2, else WRONG and left out), then timed in
alternating rounds with cuDNN (tessera.testing.do_bench_interleaved; L2 flushed); fp16,
B = 16384 / S, H = 2048 / D; TFLOP/s = 4·B·H·S²·D / time (halved causal).

    python3 benchmarks/attention_schedules.py [--quick] [--json OUT.json]
"""
from __future__ import annotations

import argparse
import json
from typing import Dict, List, Sequence

CASES = ((4096, 64, False), (4096, 64, True), (4096, 128, False), (4096, 128, True),
         (16384, 128, False))
QUICK = ((4096, 128, False), (16384, 128, False), (4096, 128, True), (4096, 64, False))
# The three-slot tiles show the carry where it applies (two-slot rings keep the wait).
TILES = {64: ((128, 128, 8, 2),),
         128: ((128, 128, 8, 2), (128, 64, 8, 2), (128, 64, 8, 3))}
# (name, OVERLAP, knobs set for the launch)
SCHEDULES = (("plain", False, {}), ("carry", False, {"wgmma_carry_rescaled": True}),
             ("overlap", True, {}), ("overlap+pingpong", True, {"pingpong": True}))


def flops(S: int, D: int, causal: bool) -> float:
    B, H = 16384 // S, 2048 // D
    return 4.0 * B * H * S * S * D / (2 if causal else 1)


def tile_label(name: str, tile: Sequence[int]) -> str:
    """'overlap 128x64' (two stages) or 'overlap 128x64 s3': one label per tile."""
    return f"{name} {tile[0]}x{tile[1]}" + (f" s{tile[3]}" if tile[3] != 2 else "")


def run_case(torch, S: int, D: int, causal: bool, rounds: int) -> Dict[str, object]:
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import tessera
    from tessera.config import knobs
    from tessera.ops.flash_attention import forward as ff
    from tessera.ops.flash_attention.configs import LOG2E, _strides
    from tessera.testing import do_bench_interleaved

    B, H = 16384 // S, 2048 // D
    gen = torch.Generator(device="cuda").manual_seed(S + D)
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16, generator=gen)
               for _ in range(3))
    out = torch.empty_like(q)
    lse = torch.empty(B, H, S, device="cuda", dtype=torch.float32)

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    want = cudnn()
    fns, contexts, notes = {}, {}, []
    for tile in TILES[D]:
        bm, bn, warps, stages = tile
        descs = ff.head_descriptors(q, k, v, block_m=bm, block_n=bn)
        for name, overlap, settings in SCHEDULES:
            def launch(descs=descs, bm=bm, bn=bn, warps=warps, stages=stages, overlap=overlap):
                ff.attention_fwd_kernel[(tessera.cdiv(S, bm), B * H)](
                    *descs, out, lse, D ** -0.5 * LOG2E, H, S, *_strides(q)[:3],
                    *_strides(k)[:3], *_strides(v)[:3], *_strides(out)[:3], D=D,
                    CAUSAL=causal, RELOAD=False, TMA=True, SPECIALIZE=False, OVERLAP=overlap,
                    BLOCK_M=bm, BLOCK_N=bn, num_warps=warps, num_stages=stages)
            label = tile_label(name, tile)
            scope = (lambda settings=settings: knobs.scope(**settings))
            try:
                with scope():
                    out.fill_(float("nan"))
                    launch()
                torch.cuda.synchronize()
            except Exception as error:  # noqa: BLE001 - one schedule must not hide the others
                notes.append(f"{label}: {type(error).__name__}: {error}".splitlines()[0][:200])
                continue
            err = float((out.float() - want.float()).abs().max())
            if not err < 2e-2:
                notes.append(f"{label}: WRONG (max abs error {err:.3g} against cuDNN)")
                continue
            fns[label], contexts[label] = launch, scope
    fns["cudnn"] = cudnn
    times = do_bench_interleaved(fns, rounds=rounds, rep=25, contexts=contexts)
    work = flops(S, D, causal)
    return {"S": S, "D": D, "causal": causal, "notes": notes,
            "tflops": {name: work / ms / 1e9 for name, ms in times.items()},
            "vs_cudnn": {name: times["cudnn"] / ms for name, ms in times.items()}}


def table(rows: Sequence[Dict[str, object]]) -> str:
    lines = []
    for row in rows:
        lines.append(f"S={row['S']} D={row['D']} causal={row['causal']}  "
                     "(TFLOP/s, x cuDNN; > 1 faster)")
        for name, value in row["tflops"].items():  # type: ignore[union-attr]
            lines.append(f"  {name:<28} {value:7.1f}  {row['vs_cudnn'][name]:.3f}")  # type: ignore[index]
        lines += [f"  note: {note}" for note in row["notes"]]  # type: ignore[union-attr]
    return "\n".join(lines)


def main(argv: List[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="four cases, four rounds")
    parser.add_argument("--json", default=None)
    options = parser.parse_args(argv)
    import torch
    rows = [run_case(torch, S, D, causal, 4 if options.quick else 7)
            for S, D, causal in (QUICK if options.quick else CASES)]
    print(table(rows))
    if options.json:
        with open(options.json, "w") as handle:
            json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    main()
