"""Runs a function on N local ranks of a torch.distributed gloo group (forked processes, a
FileStore rendezvous, no network port), for the distributed autotuning tests.

    results = run_ranks(2, scenario, tmp_path)   # [scenario(rank, world, tmp_path), ...]

Each rank's return value (JSON-able) or exception (type name and message) comes back; a rank
that does not finish within the deadline fails the test instead of hanging it.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import traceback
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, List

from tessera.autotuner import Outcome
from fakes import FakeBackend


class InstantBackend(FakeBackend):
    """FakeBackend without the compiler: every config "compiles" at once and times as
    ``times(config)``; only the selection logic runs (the chosen config still launches
    through the interpreter)."""

    def compile(self, jobs, on_done=None):
        outcomes = []
        for index, job in enumerate(jobs):
            self.compiled.append({**job.constexpr_dict, "num_warps": job.options.num_warps})
            outcomes.append(Outcome(built=({}, b""), worker=os.getpid()))
            if on_done is not None:
                on_done(index, outcomes[-1])
        return outcomes

    def bench(self, call, config, do_bench) -> float:
        self.benched.append(config)
        return self.times(config)


def _rank_main(rank: int, world: int, scenario: Callable, directory: str, store: str) -> None:
    import torch.distributed as dist
    out = Path(directory) / f"rank{rank}.json"
    try:
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                                world_size=world, timeout=timedelta(seconds=60))
        try:
            result: Any = {"value": scenario(rank, world, Path(directory))}
        finally:
            dist.destroy_process_group()
    except BaseException as error:  # noqa: BLE001 - reported to the test
        result = {"error": type(error).__name__, "message": str(error),
                  "traceback": traceback.format_exc()}
    out.write_text(json.dumps(result))
    os._exit(0)  # skip the parent's (pytest's) exit handlers in this fork


def run_ranks(world: int, scenario: Callable, directory: Path, deadline: float = 90.0,
              raises: bool = True) -> List[Any]:
    """``scenario(rank, world, directory)`` on ``world`` ranks; their results by rank. With
    ``raises``, a rank's exception fails the test with its traceback; otherwise it comes back
    as {"error": type name, "message": text}."""
    directory.mkdir(parents=True, exist_ok=True)
    # A fresh store file per group: the ranks leave with os._exit (no destructor removes the
    # file), and a second group meeting in the same file would read the first one's
    # addresses (gloo: "connection refused").
    store = str(directory / f"store-{uuid.uuid4().hex}")
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=_rank_main,
                                 args=(rank, world, scenario, str(directory), store))
                 for rank in range(world)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=deadline)
    hung = [rank for rank, process in enumerate(processes) if process.is_alive()]
    for rank in hung:
        processes[rank].kill()
    assert not hung, f"ranks {hung} did not finish within {deadline} s"
    results = []
    for rank in range(world):
        result = json.loads((directory / f"rank{rank}.json").read_text())
        if raises and "error" in result:
            raise AssertionError(f"rank {rank}: {result['traceback']}")
        results.append(result if "error" in result else result["value"])
    return results
