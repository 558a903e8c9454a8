"""What autotuning does on the machine, behind one small interface that tests replace.

The tuner (tuner.py) decides *what* to try; a :class:`TuningBackend` says *where and how*:
the GPU it tunes for (:meth:`~TuningBackend.target`), compiling a batch of configs on all
CPU cores (:meth:`~TuningBackend.compile`: the resource model, then the disk cache or the
compiler, in worker processes), loading a compiled config for launches
(:meth:`~TuningBackend.install`) and timing a launch (:meth:`~TuningBackend.bench`). A test
without a GPU subclasses it with a fake device and a fake timer, keeps the real compiler, and
launches through the interpreter.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..config import knobs
from ..device import resources
from . import parallel


@dataclass(frozen=True)
class Target:
    """The GPU a kernel is tuned for; name and arch are part of the tuning key."""
    device: int
    name: str
    arch: str            # exact target, e.g. "sm_90a"
    properties: Any      # tessera.runtime.driver.DeviceProperties


@dataclass
class CompileJob:
    """One config of one kernel, fully specialized: what a worker compiles."""
    jit_fn: Any                          # the JITFunction
    kernel_key: tuple                    # the JITFunction's in-memory key of this kernel
    values: tuple                        # runtime argument values (for loading, not compiling)
    constexprs: tuple                    # constexpr values in the JITFunction's order
    specialization: Tuple[Dict[str, str], set, set, set]  # signature, div16, eq1, large
    options: Any                         # CompileOptions (num_warps, num_stages, arch)
    target: Target
    # Prune on the tile-IR estimate before compiling. The estimate can overcount (operands a
    # later pass keeps in shared memory): when it prunes every config, the tuner compiles them
    # again without it and lets the assembler's exact counts decide.
    estimate_first: bool = True

    @property
    def constexpr_dict(self) -> Dict[str, Any]:
        """Constexprs by name, runtime parameters passed None included (as constexpr None)."""
        return self.jit_fn._constexpr_dict(self.constexprs, self.kernel_key[0])


@dataclass
class Outcome:
    """A compiled config (``built`` = (metadata, image)) or why it is not usable."""
    built: Optional[Tuple[Dict[str, Any], bytes]] = None
    failure: Optional[str] = None
    pruned: bool = False                 # dropped by the resource model before compiling
    worker: int = 0                      # pid of the process that compiled it


def failure_reason(error: BaseException) -> str:
    """A config's failure as one readable string: the error's type and message."""
    text = str(error).strip() or type(error).__name__
    if len(text) > 800:
        text = text[:800] + " ..."
    return f"{type(error).__name__}: {text}"


def compile_one(job: CompileJob) -> Outcome:
    """Runs in a worker: resource model on the tile IR, then the disk cache or the compiler,
    then the model again on the exact resources. Never raises."""
    import os

    from ..compiler import build_tile_ir
    from ..runtime import launcher

    pid = os.getpid()
    props = job.target.properties
    signature, div16, eq1, large = job.specialization
    try:
        tma = bool(getattr(job.options, "tma", False)) and \
            getattr(job.options, "arch", "") == "sm_90a"  # as compile_kernel decides it
        module = None  # without the estimate: the disk cache first, else the whole compile
        if job.estimate_first:
            module = build_tile_ir(job.jit_fn.fn, signature, job.constexpr_dict, div16, eq1,
                                   job.options.num_warps, debug=job.options.debug, tma=tma,
                                   large_tensors=large,
                                   tma_store=bool(getattr(job.options, "tma_store", False)),
                                   tma_reduce=bool(getattr(job.options, "tma_reduce", False)))
            reason = resources.why_not_fit_before_compile(
                module, job.options.num_warps, job.options.num_stages, props)
            if reason is not None:
                return Outcome(failure=reason, pruned=True, worker=pid)
        metadata, image = launcher.build(job.jit_fn, job.specialization, job.constexpr_dict,
                                         job.options, tile_ir=module)
        reason = resources.why_not_fit(resources.from_metadata(metadata), props)
        if reason is not None:
            return Outcome(failure=f"out of resources: {reason}", worker=pid)
        return Outcome(built=(metadata, image), worker=pid)
    except Exception as error:  # noqa: BLE001 - every failure of a config is a result
        return Outcome(failure=failure_reason(error), worker=pid)


class TuningBackend:
    """The real thing: the GPU of the arguments, parallel compiles, CUDA-event timing."""

    def enabled(self, jit_fn) -> bool:
        """Whether to tune at all: not when kernels run in the CPU interpreter, whose timings
        say nothing about a GPU (the first config is used)."""
        interpret = knobs.interpret if jit_fn.interpret is None else jit_fn.interpret
        return not interpret

    def target(self, jit_fn, values: Sequence[Any]) -> Target:
        from ..device import driver
        from ..runtime import launcher
        device, _ = driver.device_and_stream(values)
        props = driver.get_device_properties(device)
        return Target(device, props.name, launcher.arch_of(device), props)

    def compile(self, jobs: Sequence[CompileJob],
                on_done: Optional[Callable[[int, Outcome], None]] = None,
                on_idle: Optional[parallel.Idle] = None) -> List[Outcome]:
        """Compiles every job, in parallel on all CPU cores; ``on_done(index, outcome)`` as
        each finishes and ``on_idle()`` while waiting, both in this process (parallel.py)."""
        results = parallel.run_jobs(jobs, compile_one, on_done=on_done, on_idle=on_idle)
        return [r if isinstance(r, Outcome) else Outcome(failure=failure_reason(r))
                for r in results]

    def verify(self, job: CompileJob) -> Outcome:
        """Compiles one config in this process (normally a disk-cache hit): whether a stored
        tuning result's best config still compiles and fits. No tile-IR estimate first: the
        cached cubin's exact resources decide, and a warm start never runs the front end."""
        return compile_one(dataclasses.replace(job, estimate_first=False))

    def install(self, job: CompileJob, outcome: Outcome) -> None:
        """Loads a compiled config so that launches with its arguments find it."""
        job.jit_fn._prepare(job.kernel_key, job.values, job.constexprs, job.kernel_key[2],
                            outcome.built)

    def warm_up(self, call: Callable[[], None], config, do_bench: Callable) -> None:
        """Runs ``call`` untimed (its timing is dropped) so that the GPU's clocks are up and
        the module loaded before the configs are timed."""
        do_bench(call)

    def bench(self, call: Callable[[], None], config, do_bench: Callable) -> float:
        """Milliseconds per launch of ``call`` (the median)."""
        result = do_bench(call, quantiles=(0.5, 0.2, 0.8))
        return float(result[0] if isinstance(result, (list, tuple)) else result)
