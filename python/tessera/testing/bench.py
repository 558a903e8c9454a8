"""Timing on the GPU with CUDA events (method: docs/benchmarks.md), as ``triton.testing``.

``do_bench`` runs ``fn`` once (compile, module load and first touch stay out), estimates its
time from 5 runs, then runs it for about ``warmup`` ms untimed and ``rep`` ms timed, each
timed run preceded by an L2 flush (a write to a buffer larger than L2) so that inputs never
sit in cache. It returns the mean (or the statistic ``return_mode`` names, or ``quantiles``)
of the per-run times, in milliseconds.

    median_ms = do_bench(lambda: add(x, y, out), return_mode="median")
    p50, p20, p80 = do_bench(lambda: add(x, y, out), quantiles=[0.5, 0.2, 0.8])
"""
from __future__ import annotations

import contextlib
from typing import Callable, ContextManager, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..errors import TesseraError

RETURN_MODES = ("min", "max", "mean", "median", "all")
L2_FLUSH_BYTES = 256 * 1024 * 1024


def gpu_available() -> bool:
    """Whether kernels run on a GPU here: torch sees CUDA and the interpreter is not forced
    (``TESSERA_INTERPRET``). Tutorials run on the GPU when this holds, else interpreted."""
    from ..config import knobs
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available() and not knobs.interpret


class GPUUnavailableError(TesseraError, RuntimeError):
    """``do_bench`` was asked to time on a GPU where there is none (no CUDA device, or no
    PyTorch with CUDA): timing needs CUDA events; interpreted kernels run on the CPU, where
    their times would say nothing about a GPU."""


def _require_cuda(what: str):
    """torch, when it sees a CUDA device; else a GPUUnavailableError naming ``what``."""
    hint = ("; interpreted kernels (TESSERA_INTERPRET=1) run on the CPU and are not timed: "
            "time them on a machine with an NVIDIA GPU")
    try:
        import torch
    except ImportError:
        raise GPUUnavailableError(f"{what} times on a CUDA GPU through PyTorch, which is not "
                                  f"installed{hint}") from None
    if not torch.cuda.is_available():
        raise GPUUnavailableError(f"{what} times on a CUDA GPU, and PyTorch sees none here "
                                  f"(torch.cuda.is_available() is False){hint}")
    return torch


def _on_host(x):
    """A torch tensor (any device) as a host one; anything else as it is."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):
        return x.detach().cpu()
    return x


def relative_error(out, ref) -> float:
    """‖out − ref‖ / ‖ref‖ in float64 (NaN anywhere gives inf: NaN never passes). Takes
    NumPy arrays and framework tensors, on the GPU too (copied to the host)."""
    out = np.asarray(_on_host(out), dtype=np.float64)
    ref = np.asarray(_on_host(ref), dtype=np.float64)
    if not np.all(np.isfinite(out)):
        return float("inf")
    denom = np.linalg.norm(ref.ravel())
    return float(np.linalg.norm((out - ref).ravel()) / (denom if denom else 1.0))


def repetitions(estimate_ms: float, warmup_ms: float, rep_ms: float) -> Tuple[int, int]:
    """(untimed, timed) run counts filling ``warmup_ms`` and ``rep_ms`` (at least 1 each)."""
    estimate_ms = max(estimate_ms, 1e-6)
    return max(1, int(warmup_ms / estimate_ms)), max(1, int(rep_ms / estimate_ms))


def summarize(times_ms: Sequence[float], quantiles: Optional[Sequence[float]] = None,
              return_mode: str = "mean") -> Union[float, List[float]]:
    """The statistic of ``times_ms`` that do_bench returns: the ``quantiles`` (a list, or one
    float when one quantile is asked), else ``return_mode``: min, max, mean, median or all."""
    if return_mode not in RETURN_MODES:
        raise ValueError(f"return_mode must be one of {RETURN_MODES}, got {return_mode!r}")
    times = np.asarray(times_ms, dtype=np.float64)
    if times.size == 0:
        raise ValueError("no timings to summarize")
    if quantiles is not None:
        values = [float(v) for v in np.quantile(times, list(quantiles))]
        return values[0] if len(values) == 1 else values
    if return_mode == "all":
        return times.tolist()
    return float(getattr(np, return_mode)(times))


def do_bench(fn: Callable[[], object], warmup: float = 25, rep: float = 100,
             grad_to_none: Optional[Sequence] = None, quantiles: Optional[Sequence[float]] = None,
             return_mode: str = "mean", flush_l2: bool = True) -> Union[float, List[float]]:
    """Milliseconds per call of ``fn`` on the current CUDA stream (see the module docstring).

    ``warmup`` and ``rep`` are time budgets in ms (as Triton); ``grad_to_none``: tensors whose
    ``.grad`` is reset before each run (for backward passes).
    """
    if return_mode not in RETURN_MODES:
        raise ValueError(f"return_mode must be one of {RETURN_MODES}, got {return_mode!r}")
    torch = _require_cuda("do_bench")
    fn()
    torch.cuda.synchronize()
    cache = (torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
             if flush_l2 else None)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        if cache is not None:
            cache.zero_()
        fn()
    end.record()
    torch.cuda.synchronize()
    n_warmup, n_repeat = repetitions(start.elapsed_time(end) / 5, warmup, rep)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    for _ in range(n_warmup):
        fn()
    for i in range(n_repeat):
        for tensor in grad_to_none or ():
            tensor.grad = None
        if cache is not None:
            cache.zero_()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return summarize([s.elapsed_time(e) for s, e in zip(starts, ends)], quantiles, return_mode)


def do_bench_interleaved(fns: Mapping[str, Callable[[], object]], rounds: int = 7,
                         rep: float = 40, warmup: float = 10, flush_l2: bool = True,
                         contexts: Optional[Mapping[str, Callable[[], ContextManager]]] = None
                         ) -> Dict[str, float]:
    """Median milliseconds per call of each of ``fns``, timed in alternating rounds.

    A ratio of two kernels timed one after the other drifts with the GPU's clocks (a long
    tensor-core kernel heats the card and lowers them; a shared machine's load changes): on
    an H200 two medians of the same 0.2 ms matmul taken a minute apart differed by 8%. Here
    each round times every function for about ``rep`` ms (do_bench, L2 flushed), in turn, and
    the result per function is the median of its rounds' medians, so drift falls on all of
    them alike; each round starts one function later than the one before (round r at the
    r-th), as the first of a round measured up to 5% slower than the same code later in it
    (an H200, attention forwards after cuDNN's). ``rounds`` * ``rep`` * len(fns) ms in all.
    ``contexts`` may give a function a context (e.g. ``knobs.scope(...)``) entered around each
    of its rounds rather than each call.
    """
    per_round: Dict[str, List[float]] = {name: [] for name in fns}
    contexts = contexts or {}
    names = list(fns)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            fn = fns[name]
            with contexts.get(name, contextlib.nullcontext)():
                ms = do_bench(fn, warmup=warmup, rep=rep, return_mode="median",
                              flush_l2=flush_l2)
                per_round[name].append(float(ms))  # type: ignore[arg-type]  # one statistic
    return {name: float(np.median(times)) for name, times in per_round.items()}
