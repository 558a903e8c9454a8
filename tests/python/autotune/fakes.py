"""A tuning backend for machines without a GPU: a fake device and a fake timer; the real
compiler (parallel workers, disk cache); launches run in the interpreter (@jit(interpret=True))
so every timed call really executes the kernel with the config's values."""
from __future__ import annotations

from typing import Callable, Dict, List

from tessera.autotuner import Config, Target, TuningBackend
from tessera.runtime.driver import DeviceProperties

FAKE_H100 = DeviceProperties(
    index=0, name="Fake H100", compute_capability=(9, 0), multiprocessor_count=132,
    max_threads_per_block=1024, warp_size=32, max_shared_memory_per_block=49152,
    max_shared_memory_per_block_optin=232448, max_shared_memory_per_multiprocessor=233472,
    max_registers_per_multiprocessor=65536, l2_cache_bytes=50 * 2**20)


def config_name(config: Config) -> str:
    params = ",".join(f"{k}={v}" for k, v in sorted(config.kwargs.items()))
    return f"{params},w={config.num_warps},s={config.num_stages}"


class FakeBackend(TuningBackend):
    """``times(config) -> ms`` stands in for the GPU timer; records what it was asked."""

    def __init__(self, times: Callable[[Config], float], properties=FAKE_H100,
                 arch: str = "sm_90a") -> None:
        self.times = times
        self.properties = properties
        self.arch = arch
        self.compiled: List[Dict] = []      # one entry per compile job
        self.workers: List[int] = []        # pid of the process that compiled each job
        self.installed: List[Dict] = []
        self.benched: List[Config] = []
        self.warmed: List[Config] = []      # configs run untimed before a pass

    def enabled(self, jit_fn) -> bool:
        return True

    def target(self, jit_fn, values) -> Target:
        return Target(0, self.properties.name, self.arch, self.properties)

    def compile(self, jobs, on_done=None):
        outcomes = super().compile(jobs, on_done)
        for job, outcome in zip(jobs, outcomes):
            self.compiled.append({**job.constexpr_dict, "num_warps": job.options.num_warps})
            self.workers.append(outcome.worker)
        return outcomes

    def install(self, job, outcome) -> None:
        self.installed.append({**job.constexpr_dict, "num_warps": job.options.num_warps})

    def warm_up(self, call, config, do_bench) -> None:
        self.warmed.append(config)

    def bench(self, call, config, do_bench) -> float:
        call()
        self.benched.append(config)
        return self.times(config)
