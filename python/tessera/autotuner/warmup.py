"""``Autotuner.warmup``: every config compiled at once, without launching, as a tuning compiles
them: in forked worker processes on all CPU cores (parallel.py), each worker running
``JITFunction.warmup`` for one config, the compiled kernels coming back in the configs' order.

A config that fails in a worker is compiled again in this process, so that its error is raised
as a one-after-another warmup raises it (exceptions need not pickle across processes).

    compiled = warmup_configs(autotuner, args, kwargs)
"""
from __future__ import annotations

import functools
import os
import time
from typing import Any, Dict, List

from ..config import knobs
from . import parallel
from .backend import failure_reason


class _Failed:
    """A config whose warmup raised in a worker."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _warmup_one(jit_fn, args: tuple, final: Dict[str, Any]) -> tuple:
    """Runs in a compile worker: (pid, the CompiledKernel or _Failed)."""
    try:
        return os.getpid(), jit_fn.warmup(*args, **final)
    except Exception as error:  # noqa: BLE001 - reported by compiling again in the parent
        return os.getpid(), _Failed(failure_reason(error))


def warmup_configs(tuner, args: tuple, kwargs: Dict[str, Any]) -> List[Any]:
    """The CompiledKernel of each config that pruning keeps, for these arguments (None each in
    interpret mode, as JITFunction.warmup); sets ``tuner.compile_time`` and
    ``tuner.compile_workers``."""
    finals = []
    for config in tuner.prune_configs(kwargs, dict(zip(tuner.arg_names, args))):
        final = {**kwargs, **config.all_kwargs()}
        for layer in tuner.heuristics:
            final = layer.apply(args, final)
        finals.append(final)
    jit_fn = tuner.jit_fn
    interpret = knobs.interpret if jit_fn.interpret is None else jit_fn.interpret
    start = time.perf_counter()
    if interpret or len(finals) <= 1:  # nothing to compile, or nothing to overlap
        compiled = [jit_fn.warmup(*args, **final) for final in finals]
        workers = 1 if finals else 0
    else:
        from ..runtime import launcher
        launcher.default_arch()  # asks the driver here, once: the workers never touch CUDA
        outcomes = parallel.run_jobs(finals, functools.partial(_warmup_one, jit_fn, args))
        # A worker that died (parallel.WorkerDied): compiled again here, as a failure is.
        outcomes = [o if isinstance(o, tuple) else (None, _Failed(str(o))) for o in outcomes]
        workers = len({pid for pid, _ in outcomes if pid is not None})
        compiled = [result if not isinstance(result, _Failed)
                    else jit_fn.warmup(*args, **final)  # raises the config's error here
                    for (_, result), final in zip(outcomes, finals)]
    tuner.compile_time = time.perf_counter() - start
    tuner.compile_workers = workers
    return compiled
