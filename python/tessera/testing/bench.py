"""Timing on the GPU with CUDA events (method: shared/BENCHMARKS.md).

Warm-up first (compile, module load and first touch stay out), then many timed repetitions,
each preceded by an L2 flush (a write to a buffer larger than L2) so that inputs never sit in
cache; the median (and quantiles) of the per-repetition times is reported.
"""
from __future__ import annotations

from typing import Callable, Dict, Optional, Sequence

import numpy as np


def relative_error(out, ref) -> float:
    """‖out − ref‖ / ‖ref‖ in float64 (NaN anywhere gives inf: NaN never passes)."""
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if not np.all(np.isfinite(out)):
        return float("inf")
    denom = np.linalg.norm(ref.ravel())
    return float(np.linalg.norm((out - ref).ravel()) / (denom if denom else 1.0))


def do_bench(fn: Callable[[], object], warmup: int = 10, rep: int = 100,
             quantiles: Optional[Sequence[float]] = None, flush_l2: bool = True) -> Dict[str, float]:
    """Times ``fn`` with CUDA events; returns {"median": ms, "min": ms, "p20": ms, "p80": ms}."""
    import torch

    cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda") if flush_l2 else None
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(rep)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(rep)]
    for i in range(rep):
        if cache is not None:
            cache.zero_()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    times = np.array([s.elapsed_time(e) for s, e in zip(starts, ends)])
    result = {"median": float(np.median(times)), "min": float(times.min()),
              "p20": float(np.quantile(times, 0.2)), "p80": float(np.quantile(times, 0.8))}
    for q in quantiles or ():
        result[f"q{q}"] = float(np.quantile(times, q))
    return result
