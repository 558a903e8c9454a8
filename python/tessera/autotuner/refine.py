"""The refinement of close finalists after the timing pass (Autotuner._refine; distributed
tuning: distributed.refine_together).

One pass of one timing per config, one config after another, picks by noise when configs are
close: the GPU's clocks drift over the pass (a long tensor-core kernel heats the card), so
the configs timed first look faster. On an H200 the 8192^3 matmul's pass chose configs 7-8%
slower than the best one timed in alternating rounds. So the configs within REFINE_MARGIN of
the fastest (REFINE_FINALISTS at most) are timed again, each round timing every finalist
once in turn, and each finalist's time becomes the median of its rounds: drift falls on all
of them alike (4 finalists: ~0.25 s more per tuning).
"""
from __future__ import annotations

import statistics
from typing import Callable, Dict, List, Sequence

from . import noise
from .ranks import fastest

REFINE_MARGIN = 0.08
REFINE_FINALISTS = 4
REFINE_ROUNDS = 5
REFINE_ROUND_MS = 10.0


def finalists(timings: Dict[int, float]) -> List[int]:
    """The candidates to time again, fastest first (equal times: the lower index first): those
    within REFINE_MARGIN of the fastest, REFINE_FINALISTS at most; none when fewer than two.
    A pure function of the timings, so every rank of a group, given the same gathered
    timings, picks the same finalists."""
    if len(timings) < 2:
        return []
    best = timings[fastest(timings)]
    close = sorted((ms, index) for index, ms in timings.items()
                   if ms <= best * (1.0 + REFINE_MARGIN))
    chosen = [index for _, index in close[:REFINE_FINALISTS]]
    return chosen if len(chosen) >= 2 else []


def rounds(indices: Sequence[int], bench: Callable[[int], float],
           key_text: str) -> Dict[int, float]:
    """{index: the median of its REFINE_ROUNDS round timings}, each round timing every one of
    ``indices`` once, in turn (``bench(index)`` -> ms; TESSERA_AUTOTUNE_NOISE applies)."""
    times: Dict[int, List[float]] = {index: [] for index in indices}
    for _ in range(REFINE_ROUNDS):
        for index in indices:
            times[index].append(noise.perturb(bench(index), key_text, index))
    return {index: statistics.median(values) for index, values in times.items()}
