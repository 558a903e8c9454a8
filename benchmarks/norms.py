"""Memory-bound kernels in GB/s: softmax, RMSNorm and LayerNorm forward and backward
(tessera.ops) against PyTorch and the copy bandwidth, all in the same run.

Method (docs/benchmarks.md): CUDA-event timing after warm-up, median of the runs filling
100 ms, L2 flushed before each; fresh random inputs, checked against float64 on the timed
inputs. Bytes are those each pass must move: softmax and the forwards read x and write y
(2 · size), the backwards read x and dy and write dx (3 · size). The ceiling is a
device-to-device copy of the same tensor, measured here. Registers and spills come from
ptxas. A short table is printed last; --json OUT keeps every number.

    python3 benchmarks/norms.py [--json OUT] [--dtype float32] [--quick]
"""
from __future__ import annotations

import argparse
import json
from typing import Callable, Dict, List

import torch
import torch.nn.functional as F

import tessera.ops.fused_softmax as softmax_ops
import tessera.ops.norms as norms
from tessera.ops import (layer_norm, layer_norm_backward, rms_norm, rms_norm_backward,
                         softmax)
from tessera.testing import do_bench

BOUNDS = {"float32": 1e-5, "float16": 5e-3, "bfloat16": 1e-2}


def gbps(fn: Callable[[], object], nbytes: int) -> float:
    return nbytes / do_bench(fn, return_mode="median") / 1e6


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    if not torch.isfinite(out).all():
        return float("inf")
    out = out.double()
    return float(torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref))


def resources(kernel, *args, **config) -> Dict[str, int]:
    metadata = kernel.compile(*args, **config).metadata
    return {"registers": metadata.get("registers", -1),
            "spill_stores": metadata.get("spill_stores", -1)}


def softmax_cases(dtype: torch.dtype, quick: bool) -> List[dict]:
    rows = []
    columns = (1024, 4096, 16384) if quick else (256, 1024, 2048, 4096, 8192, 16384, 32768)
    for n_cols in columns:
        x = torch.randn((4096, n_cols), device="cuda", dtype=dtype) * 4
        out = torch.empty_like(x)
        size = x.numel() * x.element_size()
        softmax(x, out)
        error = relative_error(out, torch.softmax(x.double(), dim=1))
        config = softmax_ops.softmax_config(n_cols)
        rows.append({
            "kernel": "softmax", "shape": [4096, n_cols], "error": error,
            "tessera": gbps(lambda: softmax(x, out), 2 * size),
            "torch": gbps(lambda: torch.softmax(x, dim=1), 2 * size),
            "copy": gbps(lambda: out.copy_(x), 2 * size),
            **resources(softmax_ops.softmax_kernel, out, x, n_cols, n_cols, 4096, n_cols,
                        **config)})
    return rows


def norm_cases(dtype: torch.dtype, quick: bool) -> List[dict]:
    rows = []
    shapes = [(2048, 96, 512)] if quick else [
        (2048, 64, 128), (2048, 77, 128), (2048, 91, 256), (2048, 96, 256), (2048, 128, 256),
        (2048, 77, 512), (2048, 96, 512), (2048, 128, 512), (512, 91, 512)]
    for shape in shapes:
        H = shape[-1]
        x = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
        w = (1 + 0.5 * torch.randn(H, device="cuda")).to(dtype).requires_grad_()
        b = (0.5 * torch.randn(H, device="cuda")).to(dtype).requires_grad_()
        dy = torch.randn_like(x)
        xd, wd, bd = x.detach(), w.detach(), b.detach()
        size = x.numel() * x.element_size()
        copy_out = torch.empty_like(xd)
        copy = gbps(lambda: copy_out.copy_(xd), 2 * size)
        y_rms = F.rms_norm(x, (H,), w, 1e-6)
        y_ln = F.layer_norm(x, (H,), w, b, 1e-5)
        grads_rms = torch.autograd.grad(y_rms, (x, w), dy, retain_graph=True)
        grads_ln = torch.autograd.grad(y_ln, (x, w, b), dy, retain_graph=True)
        partials = torch.empty((8, H), device="cuda", dtype=torch.float32)
        forward = norms.tile_config(H)
        backward_rms = norms.backward_config(H, reductions_per_row=2)
        backward_ln = norms.backward_config(H, reductions_per_row=4)
        n = xd.numel() // H  # rows, as the wrappers launch them (it is specialized on)
        cases = {
            "rms_norm fwd": (lambda: rms_norm(xd, wd, 1e-6),
                             lambda: F.rms_norm(xd, (H,), wd, 1e-6), 2, (y_rms,),
                             (norms.rms_norm_fwd, (xd, wd, xd, n, H, 1e-6), forward)),
            "rms_norm bwd": (lambda: rms_norm_backward(dy, xd, wd, 1e-6),
                             lambda: torch.autograd.grad(y_rms, (x, w), dy, retain_graph=True),
                             3, grads_rms,
                             (norms.rms_norm_bwd, (dy, xd, wd, xd, partials, n, H, 1e-6),
                              backward_rms)),
            "layer_norm fwd": (lambda: layer_norm(xd, wd, bd, 1e-5),
                               lambda: F.layer_norm(xd, (H,), wd, bd, 1e-5), 2, (y_ln,),
                               (norms.layer_norm_fwd, (xd, wd, bd, xd, n, H, 1e-5), forward)),
            "layer_norm bwd": (lambda: layer_norm_backward(dy, xd, wd, 1e-5),
                               lambda: torch.autograd.grad(y_ln, (x, w, b), dy,
                                                           retain_graph=True),
                               3, grads_ln,
                               (norms.layer_norm_bwd,
                                (dy, xd, wd, xd, partials, partials, n, H, 1e-5), backward_ln)),
        }
        for name, (ours, theirs, passes, expected, (kernel, args, config)) in cases.items():
            got = ours()
            got = got if isinstance(got, tuple) else (got,)
            # PyTorch's own results as the reference of the timed inputs (float64 is in the
            # GPU tests); the error bound is the dtype's.
            error = max(relative_error(a, e.detach().double()) for a, e in zip(got, expected))
            rows.append({
                "kernel": name, "shape": list(shape), "error": error,
                "tessera": gbps(ours, passes * size), "torch": gbps(theirs, passes * size),
                "copy": copy, **resources(kernel, *args, **config)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", default=None, help="write every number to this file")
    parser.add_argument("--dtype", default="float32", choices=sorted(BOUNDS))
    parser.add_argument("--quick", action="store_true", help="one or three shapes per kernel")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    rows = softmax_cases(dtype, args.quick) + norm_cases(dtype, args.quick)
    print(f"{'kernel':<15} {'shape':<17} {'tessera GB/s':>12} {'torch GB/s':>11} "
          f"{'copy GB/s':>10} {'vs copy':>8} {'vs torch':>9} {'regs':>5} {'spills':>6} "
          f"{'error':>8}")
    for r in rows:
        ok = "" if r["error"] < BOUNDS[args.dtype] else "  ERROR"
        print(f"{r['kernel']:<15} {str(tuple(r['shape'])):<17} {r['tessera']:>12.0f} "
              f"{r['torch']:>11.0f} {r['copy']:>10.0f} {r['tessera'] / r['copy']:>8.1%} "
              f"{r['tessera'] / r['torch']:>8.2f}x {r['registers']:>5} {r['spill_stores']:>6} "
              f"{r['error']:>8.1e}{ok}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"dtype": args.dtype, "device": torch.cuda.get_device_name(),
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
