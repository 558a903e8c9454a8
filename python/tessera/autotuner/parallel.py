"""Runs compile jobs on all CPU cores: the autotuner compiles every candidate config at once.

Compiling is Python (front end) plus C++ passes that hold the GIL, so threads would run one at
a time; worker processes do not. Workers are forked: a fork child inherits the kernel functions
(even ones defined in a notebook or a test), the compiler already imported, and the knobs, and
nothing needs pickling but a job's index and its result. Children never touch CUDA (compiling
needs no GPU), so forking a process that holds a CUDA context is safe. Where fork is missing
(Windows, macOS' default), threads still overlap the ptxas subprocesses.

A worker that dies (a crash in native code) does not hang the pool: the jobs it may have been
running are run again one per process, so the culprit alone fails with its exit status.

    results = run_jobs(jobs, work, on_done=lambda index, result: ...)

``on_idle`` (optional) runs in this process while it waits for results: the autotuner keeps
the GPU warm with a config compiled early while the others still compile (warming.py).
"""
from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import warnings
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Dict, List, Optional, Sequence

Work = Callable[[Any], Any]
Done = Callable[[int, Any], None]
# Called while no result is ready; True: call again as soon as it returns (it did some work
# and has more), False: nothing to do until the next result arrives.
Idle = Callable[[], bool]

# The jobs and the work function of the running batch, inherited by forked workers: only an
# index crosses the process boundary on the way in.
_BATCH: Optional[tuple] = None


class WorkerDied(Exception):
    """A job's worker process ended without a result (native crash, os._exit, OOM kill)."""


def cpu_count() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def fork_available() -> bool:
    """Whether workers can be forked (a daemonic process may not have children)."""
    return ("fork" in multiprocessing.get_all_start_methods()
            and not multiprocessing.current_process().daemon)


def _run_indexed(index: int) -> Any:
    jobs, work = _BATCH  # type: ignore[misc]
    return work(jobs[index])


def _forked_executor(workers: int) -> concurrent.futures.Executor:
    context = multiprocessing.get_context("fork")
    with warnings.catch_warnings():
        # Python 3.12+ warns about forking a multi-threaded process (PyTorch and CUDA start
        # threads); the children run only the compiler, which takes no lock those threads hold.
        warnings.simplefilter("ignore", DeprecationWarning)
        return concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=context)


def _collect(futures: Dict[Any, int], on_result: Callable[[int, Any], None],
             on_idle: Optional[Idle]) -> None:
    """Hands each finished future to ``on_result(index, future)``, in the order they finish
    (the lower index first among those finishing together); while none is ready and
    ``on_idle`` has work, calls it instead of blocking."""
    pending = set(futures)
    idle_has_work = on_idle is not None
    while pending:
        done, pending = concurrent.futures.wait(
            pending, timeout=0 if idle_has_work else None,
            return_when=concurrent.futures.FIRST_COMPLETED)
        for future in sorted(done, key=futures.__getitem__):
            on_result(futures[future], future)
        if done:
            idle_has_work = on_idle is not None   # a new result may give it work
        elif on_idle is not None:
            idle_has_work = bool(on_idle())


def _drain(executor: concurrent.futures.Executor, indices: Sequence[int],
           results: Dict[int, Any], on_done: Optional[Done],
           on_idle: Optional[Idle] = None) -> List[int]:
    """Runs ``indices`` on ``executor``; returns those lost to a dead worker."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        futures = {executor.submit(_run_indexed, i): i for i in indices}
    lost = []

    def on_result(index: int, future) -> None:
        try:
            results[index] = future.result()
        except BrokenProcessPool:
            lost.append(index)
            return
        if on_done is not None:
            on_done(index, results[index])

    _collect(futures, on_result, on_idle)
    return sorted(lost)


def run_jobs(jobs: Sequence[Any], work: Work, on_done: Optional[Done] = None,
             workers: Optional[int] = None, on_idle: Optional[Idle] = None) -> List[Any]:
    """``[work(job) for job in jobs]``, computed in parallel; ``on_done(index, result)`` is
    called in this process as each finishes, ``on_idle()`` while it waits (see Idle; not
    with a single worker: the jobs then run here). ``work`` should catch its own exceptions
    and return them as results; a job whose worker died gets a :class:`WorkerDied` result."""
    global _BATCH
    workers = min(len(jobs), workers or cpu_count())
    results: Dict[int, Any] = {}
    if workers <= 1:
        for index, job in enumerate(jobs):
            results[index] = work(job)
            if on_done is not None:
                on_done(index, results[index])
        return [results[i] for i in range(len(jobs))]
    if not fork_available():
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            futures = {pool.submit(work, job): i for i, job in enumerate(jobs)}

            def on_result(index: int, future) -> None:
                results[index] = future.result()
                if on_done is not None:
                    on_done(index, results[index])

            _collect(futures, on_result, on_idle)
        return [results[i] for i in range(len(jobs))]
    _BATCH = (list(jobs), work)
    try:
        executor = _forked_executor(workers)
        try:
            lost = _drain(executor, range(len(jobs)), results, on_done, on_idle)
        finally:
            executor.shutdown(wait=True, cancel_futures=True)
        for index in lost:  # one process each: only the job that crashes its worker fails
            executor = _forked_executor(1)
            try:
                if _drain(executor, [index], results, on_done):
                    results[index] = WorkerDied("the compiler's worker process died while "
                                                "compiling this config")
                    if on_done is not None:
                        on_done(index, results[index])
            finally:
                executor.shutdown(wait=True, cancel_futures=True)
    finally:
        _BATCH = None
    return [results[i] for i in range(len(jobs))]
