"""The GPU warmed under the compiles (autotuner/warming.py), with a fake clock, fake compile
durations and the fake timer of fakes.py: the first config compiled warms the GPU while the
others compile; the warm-up before the pass then runs only what is left of WARM_UP_MS, or
the whole of it (first config, as before) when nothing overlapped or the GPU idled since."""
import numpy as np
import pytest
import tessera
import tessera.language as tl
from fakes import FakeBackend
from tessera.autotuner import Outcome, warming


@tessera.jit(interpret=True)
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0, mask=mask)


CONFIGS = [tessera.Config({"BLOCK": b}, num_warps=4) for b in (128, 256, 512, 1024)]
TRUTH = {128: 1.3, 256: 1.0, 512: 1.6, 1024: 2.0}   # 256 the fastest, nothing within 8%


class Clock:
    """Fake seconds: advanced by the fake compiles and warm-ups, read by warming.py."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class Compiling(FakeBackend):
    """Config i "compiles" in compile_ms[i] ms of fake time, all at once, as the pool runs
    them; the pool's callbacks as parallel.run_jobs makes them: on_idle while none is ready
    (until it says it has no work), on_done as each finishes. ``after_ms`` passes between the
    compiles and the pass. A warm-up advances the clock by its budget; events record all."""

    def __init__(self, clock, compile_ms, after_ms=0.0):
        super().__init__(lambda config: TRUTH[config.kwargs["BLOCK"]])
        self.clock, self.compile_ms, self.after_ms = clock, compile_ms, after_ms
        self.events = []
        self.got_on_idle = None

    def compile(self, jobs, on_done=None, on_idle=None):
        self.got_on_idle = on_idle is not None
        outcomes = [Outcome(built=({}, b""), worker=1) for _ in jobs]
        start, more = self.clock.now, True
        for finish, index in sorted((self.compile_ms[i], i) for i in range(len(jobs))):
            while on_idle is not None and more and (self.clock.now - start) * 1e3 < finish - 1e-6:
                more = on_idle()
            self.clock.now = max(self.clock.now, start + finish / 1e3)
            self.events.append(("compiled", index))
            if on_done is not None:
                on_done(index, outcomes[index])
            more = True
        self.clock.now += self.after_ms / 1e3
        return outcomes

    def warm_up(self, call, config, do_bench):
        ms = do_bench.keywords["warmup"] + do_bench.keywords["rep"]
        self.events.append(("warm", CONFIGS.index(config), ms))
        self.clock.now += ms / 1e3

    def bench(self, call, config, do_bench):
        self.events.append(("bench", CONFIGS.index(config)))
        return super().bench(call, config, do_bench)


def tune(monkeypatch, compile_ms, after_ms=0.0, **options):
    clock = Clock()
    monkeypatch.setattr(warming, "clock", clock)
    kernel = tessera.autotune(configs=CONFIGS, key=["n"], cache_results=False,
                              **options)(scale_kernel)
    kernel.backend = fake = Compiling(clock, compile_ms, after_ms)
    n = 1000
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, dtype=np.float32)
    kernel[lambda meta: (tessera.cdiv(n, meta["BLOCK"]),)](x, out, n)
    np.testing.assert_allclose(out, x * 3.0, rtol=1e-6)
    assert kernel.best_config == CONFIGS[1]
    warms = [e for e in fake.events if e[0] == "warm"]
    first_bench = next(i for i, e in enumerate(fake.events) if e[0] == "bench")
    before_pass = [e for e in fake.events[:first_bench] if e[0] == "warm"]
    assert warms == before_pass, "every warm-up comes before the timed pass"
    return fake, warms


def test_the_first_config_compiled_warms_the_gpu_while_the_others_compile(monkeypatch):
    # Config 1 compiles first (100 ms), config 0 last (400 ms): 300 ms of bursts of config 1.
    fake, warms = tune(monkeypatch, [400, 100, 300, 200])
    assert fake.got_on_idle
    assert {config for _, config, _ in warms} == {1}
    assert {ms for _, _, ms in warms} == {warming.WARM_BURST_MS}
    assert sum(ms for _, _, ms in warms) >= warming.WARM_UP_MS
    # The bursts fall between "config 1 compiled" and "config 0 compiled"; none after: the GPU
    # is warm when the pass starts, so the pre-pass warm-up is skipped.
    compiled_at = {e[1]: i for i, e in enumerate(fake.events) if e[0] == "compiled"}
    last_warm = max(i for i, e in enumerate(fake.events) if e[0] == "warm")
    assert compiled_at[1] < fake.events.index(warms[0]) and last_warm < compiled_at[0]


def test_a_short_overlap_leaves_the_rest_of_the_warm_up_to_before_the_pass(monkeypatch):
    # Config 1 compiles 40 ms before the others: four bursts, then the 60 ms left.
    fake, warms = tune(monkeypatch, [300, 260, 300, 300])
    bursts = [("warm", 1, warming.WARM_BURST_MS)] * 4
    assert warms == bursts + [("warm", 1, pytest.approx(warming.WARM_UP_MS - 40))]


def test_no_overlap_warms_the_first_config_for_the_whole_warm_up_as_before(monkeypatch):
    fake, warms = tune(monkeypatch, [300, 300, 300, 300])
    assert warms == [("warm", 0, warming.WARM_UP_MS)]


def test_an_idle_gap_after_the_compiles_means_the_whole_warm_up_again(monkeypatch):
    gap = warming.WARM_GAP_MS + 30             # the GPU idled: its clocks may have dropped
    fake, warms = tune(monkeypatch, [400, 100, 300, 200], after_ms=gap)
    assert warms[-1] == ("warm", 0, warming.WARM_UP_MS)
    assert all(w == ("warm", 1, warming.WARM_BURST_MS) for w in warms[:-1]) and warms[:-1]


def test_a_kernel_given_its_own_timer_is_never_warmed(monkeypatch):
    fake, warms = tune(monkeypatch, [400, 100, 300, 200],
                       do_bench=lambda fn, quantiles=None: (fn(), 1.0)[1])
    assert warms == [] and fake.got_on_idle is False


def test_a_warm_config_that_fails_to_launch_stops_the_bursts(monkeypatch):
    class Failing(Compiling):
        def warm_up(self, call, config, do_bench):
            super().warm_up(call, config, do_bench)
            if CONFIGS.index(config) == 1:
                raise RuntimeError("launch failed")

    clock = Clock()
    monkeypatch.setattr(warming, "clock", clock)
    kernel = tessera.autotune(configs=CONFIGS, key=["n"], cache_results=False)(scale_kernel)
    kernel.backend = fake = Failing(clock, [400, 100, 300, 200])
    n = 300
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, dtype=np.float32)
    kernel[lambda meta: (tessera.cdiv(n, meta["BLOCK"]),)](x, out, n)
    np.testing.assert_allclose(out, x * 3.0, rtol=1e-6)
    warms = [e for e in fake.events if e[0] == "warm"]
    # One failed burst of config 1, then the pass's own warm-up of config 0 (a cold GPU).
    assert warms == [("warm", 1, warming.WARM_BURST_MS), ("warm", 0, warming.WARM_UP_MS)]


def test_with_the_real_compile_pool(tmp_path, monkeypatch):
    """Real compiles in the forked pool (on_idle from parallel.run_jobs), real time: the warm
    launches happen in this process, before the pass, of configs that compiled."""
    import time

    from tessera.autotuner import TuningBackend
    from tessera.config import knobs
    monkeypatch.setattr(knobs, "cache_dir", str(tmp_path))

    class RealPool(FakeBackend):
        def compile(self, jobs, on_done=None, on_idle=None):
            self.events = getattr(self, "events", [])
            return TuningBackend.compile(self, jobs, on_done, on_idle)

        def warm_up(self, call, config, do_bench):
            ms = do_bench.keywords["warmup"] + do_bench.keywords["rep"]
            self.events.append(("warm", CONFIGS.index(config), ms))
            time.sleep(ms / 1e3)

        def bench(self, call, config, do_bench):
            self.events.append(("bench", CONFIGS.index(config)))
            return super().bench(call, config, do_bench)

    kernel = tessera.autotune(configs=CONFIGS, key=["n"], cache_results=False)(scale_kernel)
    kernel.backend = fake = RealPool(lambda config: TRUTH[config.kwargs["BLOCK"]])
    n = 777
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, dtype=np.float32)
    kernel[lambda meta: (tessera.cdiv(n, meta["BLOCK"]),)](x, out, n)
    np.testing.assert_allclose(out, x * 3.0, rtol=1e-6)
    assert kernel.best_config == CONFIGS[1]
    first_bench = next(i for i, e in enumerate(fake.events) if e[0] == "bench")
    warms = [e for e in fake.events if e[0] == "warm"]
    assert warms and all(e[0] == "warm" for e in fake.events[:first_bench])
    assert len(warms) == first_bench                   # none during or after the pass
    bursts = [w for w in warms if w[2] == warming.WARM_BURST_MS]
    assert len({config for _, config, _ in bursts}) <= 1  # one warm config under the compiles


@tessera.jit(interpret=True)
def accumulate_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    total = tl.load(out_ptr + offs, mask=mask) + tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, total, mask=mask)


def test_warm_launches_under_the_compiles_keep_restore_value_arguments(monkeypatch):
    """A kernel that updates its argument: the warm launches while others compile run on the
    saved arguments (restore_value), so the caller's launch adds exactly once."""
    class Launching(Compiling):
        def warm_up(self, call, config, do_bench):
            call()                                   # really launch (interpreted)
            super().warm_up(call, config, do_bench)

    clock = Clock()
    monkeypatch.setattr(warming, "clock", clock)
    kernel = tessera.autotune(configs=CONFIGS, key=["n"], cache_results=False,
                              restore_value=["out_ptr"])(accumulate_kernel)
    kernel.backend = fake = Launching(clock, [400, 100, 300, 200])
    n = 1000
    rng = np.random.default_rng(5)
    x = rng.standard_normal(n).astype(np.float32)
    out = rng.standard_normal(n).astype(np.float32)
    expected = out + x
    kernel[lambda meta: (tessera.cdiv(n, meta["BLOCK"]),)](x, out, n)
    np.testing.assert_array_equal(out, expected)
    assert len([e for e in fake.events if e[0] == "warm"]) >= 10   # launched many times
