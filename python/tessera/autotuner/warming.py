"""The GPU kept warm while the configs compile, so that the pass starts on a warm GPU without
paying the whole warm-up after the compiles (Autotuner._warm_up).

Why a warm-up at all: the GPU idles while the configs compile (half a second or more): its
clocks drop and a new module's first launches pay its lazy load, so the first config timed
read 50% slow on an H200 (docs/perf/autotune_timing.md). The tuner therefore runs a config,
untimed, for about WARM_UP_MS before the pass. That warm-up used to follow the compiles; now
it overlaps them where it can:

* the compile pool calls back in this process as each config finishes compiling (on_done)
  and while it waits for the others (on_idle; parallel.py). The first config that compiles
  is loaded at once and run, untimed, in bursts of WARM_BURST_MS while the others compile;
* a *warm stretch* is the time the GPU has been kept busy without an idle gap longer than
  WARM_GAP_MS. When the pass starts, the warm-up runs only what the current stretch lacks of
  WARM_UP_MS: nothing when the compiles went on WARM_UP_MS after the first one finished; the
  whole WARM_UP_MS, with the first config as before, when nothing was warmed or the GPU then
  idled longer than WARM_GAP_MS.

So the GPU is as warm as before when the pass starts; only the wait for it moved under the
compiles. The last compile's result waits for the burst in progress: at most one burst
(do_bench runs a kernel at least 8 times, so for a kernel of 10 ms or more a burst is as long
as the old warm-up was, and the warm-up it replaces is then skipped). Only with the default
timer (a kernel given its own timer is timed as it asked).
"""
from __future__ import annotations

import functools
import time
from typing import Any, Callable, Optional

WARM_UP_MS = 100.0    # the GPU kept busy this long before the pass (Autotuner._warm_up)
WARM_BURST_MS = 10.0  # one burst while the compile pool waits (the callback's latency)
WARM_GAP_MS = 20.0    # an idle gap longer than this ends a warm stretch (clocks may drop)
MIN_WARM_MS = 2.0     # a remainder shorter than this is not worth a launch

clock: Callable[[], float] = time.perf_counter  # seconds; tests replace it


def timer(ms: float) -> Callable:
    """testing.do_bench with a budget of about ``ms`` in all (half warm-up, half timed)."""
    from .. import testing
    return functools.partial(testing.do_bench, warmup=ms / 2, rep=ms / 2)


class Warmer:
    """Runs the first config that compiles while the others compile (see the module doc).

    ``backend`` is the TuningBackend, ``make_call(config)`` the launch of a config (its
    hooks included), ``installed`` the ids of the compile jobs already loaded (shared with
    the pass, which then does not load them again)."""

    def __init__(self, backend, make_call: Callable[[Any], Callable[[], None]],
                 installed: set) -> None:
        self.backend = backend
        self.make_call = make_call
        self.installed = installed
        self.call: Optional[Callable[[], None]] = None
        self.config: Any = None
        self.failed = False            # the warm config could not load or launch: stop
        self.stretch_start: Optional[float] = None
        self.last_end: Optional[float] = None

    def compiled(self, job, outcome, config) -> None:
        """on_done of the compile pool: the first config compiled becomes the warm one."""
        if self.call is not None or self.failed or outcome.failure is not None:
            return
        try:
            if id(job) not in self.installed:
                self.backend.install(job, outcome)
                self.installed.add(id(job))
            self.call, self.config = self.make_call(config), config
        except Exception:  # noqa: BLE001 - the pass loads (and reports) this config anyway
            self.failed = True

    def idle(self) -> bool:
        """on_idle of the compile pool: one burst; whether there is more to do."""
        if self.call is None:
            return False
        self.run(WARM_BURST_MS)
        return self.call is not None

    def run(self, ms: float) -> None:
        """Runs the warm config for about ``ms``, untimed, extending the warm stretch."""
        if self.call is None:
            return
        start = clock()
        if not self._warm(start):
            self.stretch_start = start
        try:
            self.backend.warm_up(self.call, self.config, timer(ms))
        except Exception:  # noqa: BLE001 - the pass times (and reports) this config anyway
            self.call, self.failed, self.last_end = None, True, None
            return
        self.last_end = clock()

    def _warm(self, now: float) -> bool:
        return self.last_end is not None and (now - self.last_end) * 1e3 <= WARM_GAP_MS

    def remaining_ms(self) -> float:
        """What the warm stretch lacks of WARM_UP_MS now: WARM_UP_MS when the GPU is cold
        (never warmed, or idle for longer than WARM_GAP_MS), 0 when warm long enough."""
        if self.stretch_start is None or self.last_end is None or not self._warm(clock()):
            return WARM_UP_MS
        return max(0.0, WARM_UP_MS - (self.last_end - self.stretch_start) * 1e3)
