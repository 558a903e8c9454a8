"""Host time per call of tessera.ops against the PyTorch ops they stand for, on one GPU.

A training step at small shapes waits for the host: when a call's Python and launch take longer
than its kernels, the GPU idles between kernels and the step is host-bound. For each case this
prints, in one run: the host time per call (calls queued back to back without a sync, the GPU
kept busy: what the caller waits before its next line runs), the device time per call (CUDA
events around the same calls), and whether the host is the bound. PyTorch's own op is timed
beside each Tessera op as the anchor (its host time is what users compare against).

    python3 benchmarks/ops_host_time.py [--calls 200] [--json OUT.json]

Cases: attention forward at S = 1024 and 4096 (D = 64; the TMA path and, with
TESSERA_ATTENTION_TMA=off, the cp.async one) against SDPA; masked attention (10%-live blocks,
a key bias) against SDPA with the mask as a bias; a 1024³ matmul against torch.matmul; an RMS
norm against torch.nn.functional.rms_norm. docs/perf/launch_overhead.md, "The ops' launches".
"""
from __future__ import annotations

import argparse
import json
import time
from typing import Callable, Dict, List, Optional, Sequence

DEVICE = "cuda"


def host_and_device_ms(torch, fn: Callable, calls: int) -> Dict[str, float]:
    """(host ms per call, device ms per call) of ``calls`` calls of ``fn`` queued back to back:
    the host time is taken without a sync (the queue keeps the GPU busy), the device time by
    events around a second batch."""
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - start) / calls * 1e3
    torch.cuda.synchronize()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(calls):
        fn()
    end.record()
    torch.cuda.synchronize()
    return {"host_ms": host, "device_ms": begin.elapsed_time(end) / calls}


def cases(torch) -> List[tuple]:
    """(name, tessera fn, torch fn, knob scope or None) of every case, inputs made once."""
    import torch.nn.functional as F
    from tessera.ops import attention, attention_masked, matmul, rms_norm
    gen = torch.Generator(device=DEVICE).manual_seed(0)

    def randn(*shape, dtype=torch.bfloat16):
        return torch.randn(shape, generator=gen, device=DEVICE, dtype=dtype)

    found = []
    for S in (1024, 4096):
        q, k, v = (randn(1, 16, S, 64) for _ in range(3))
        sdpa = (lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v))
        for path in ("auto", "off"):
            found.append((f"attention fwd S={S} D=64 tma={path}",
                          (lambda q=q, k=k, v=v: attention(q, k, v)), sdpa,
                          dict(attention_tma=path)))
    S = 4096
    q, k, v = (randn(1, 16, S, 64) for _ in range(3))
    blocks = torch.rand((S // 128, S // 128), generator=gen, device=DEVICE) < 0.1
    mask = blocks.repeat_interleave(128, 0).repeat_interleave(128, 1)[None, None]
    bias = randn(1, 16, 1, S)
    float_mask = torch.where(mask, bias, torch.tensor(float("-inf"), device=DEVICE,
                                                      dtype=bias.dtype))
    found.append((f"attention_masked fwd S={S} D=64 10%-live",
                  lambda: attention_masked(q, k, v, mask=mask, bias=bias),
                  lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=float_mask), None))
    a, b = randn(1024, 1024, dtype=torch.float16), randn(1024, 1024, dtype=torch.float16)
    found.append(("matmul 1024^3 fp16", lambda: matmul(a, b), lambda: a @ b, None))
    x, w = randn(4096, 1024), randn(1024)
    found.append(("rms_norm 4096x1024", lambda: rms_norm(x, w),
                  lambda: F.rms_norm(x, (1024,), w), None))
    return found


def measure(torch, calls: int, selected: Optional[Sequence[str]] = None) -> List[dict]:
    from tessera.config import knobs
    rows = []
    for name, ours, theirs, scope in cases(torch):
        if selected and not any(s in name for s in selected):
            continue
        with knobs.scope(**(scope or {})):
            tessera_times = host_and_device_ms(torch, ours, calls)
        torch_times = host_and_device_ms(torch, theirs, calls)
        rows.append({"case": name, "tessera": tessera_times, "torch": torch_times})
    return rows


def table(rows: Sequence[dict]) -> str:
    lines = [f"{'case':<42} {'tessera host':>12} {'device':>8} {'torch host':>11} "
             f"{'device':>8} {'host/torch':>10}  bound"]
    for row in rows:
        ours, theirs = row["tessera"], row["torch"]
        bound = "host" if ours["host_ms"] > ours["device_ms"] else "device"
        lines.append(f"{row['case']:<42} {ours['host_ms']:>12.4f} {ours['device_ms']:>8.4f} "
                     f"{theirs['host_ms']:>11.4f} {theirs['device_ms']:>8.4f} "
                     f"{ours['host_ms'] / theirs['host_ms']:>10.2f}  {bound}")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--only", nargs="*", help="cases whose name contains one of these")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        raise SystemExit("ops_host_time.py needs a CUDA GPU")
    rows = measure(torch, args.calls, args.only)
    print(f"{torch.cuda.get_device_name()}: ms per call ({args.calls} calls each)")
    print(table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
