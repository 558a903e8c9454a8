"""The autotuner's refinement of close finalists (Autotuner._refine), with the fake device and
timer of fakes.py: a one-pass timing biased by clock drift picks the wrong config; alternating
rounds over the finalists pick the right one. Only the default timer refines."""
import numpy as np
import pytest
import tessera
import tessera.language as tl
from fakes import FakeBackend
from tessera.autotuner import tuner


@tessera.jit(interpret=True)
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0, mask=mask)


def grid(n):
    return lambda meta: (tessera.cdiv(n, meta["BLOCK"]),)


class Drifting:
    """A GPU whose clocks start boosted: the first ``boosted`` timings read ``boost`` times the
    true time (as a cool card runs the first configs of a pass faster), later ones the truth."""

    def __init__(self, truth, boosted, boost=0.9):
        self.truth, self.boosted, self.boost, self.calls = truth, boosted, boost, 0

    def __call__(self, config):
        self.calls += 1
        factor = self.boost if self.calls <= self.boosted else 1.0
        return self.truth[config.kwargs["BLOCK"]] * factor


CONFIGS = [tessera.Config({"BLOCK": b}, num_warps=4) for b in (128, 256, 512, 1024)]
TRUTH = {128: 1.00, 256: 0.97, 512: 1.50, 1024: 2.00}  # 256 is the fastest; 128 within 8%


def run(kernel, n=1000, seed=0):
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, dtype=np.float32)
    kernel[grid(n)](x, out, n)
    np.testing.assert_allclose(out, x * 3.0, rtol=1e-6)
    return kernel


def test_drift_in_one_pass_is_undone_by_alternating_rounds():
    timer = Drifting(TRUTH, boosted=1)  # the first config timed reads 0.90, below 256's 0.97
    kernel = tessera.autotune(configs=CONFIGS, key=["n"], cache_results=False)(scale_kernel)
    kernel.backend = fake = FakeBackend(timer)
    run(kernel)
    assert kernel.best_config == CONFIGS[1]
    # One pass over the four, then five rounds of the two finalists (0.90 and 0.97 are within
    # the margin; 1.5 and 2.0 are not), alternating: 128, 256, 128, 256, ...
    finalists = [CONFIGS[0], CONFIGS[1]] * tuner.REFINE_ROUNDS
    assert fake.benched == CONFIGS + finalists
    assert kernel.configs_timings[CONFIGS[0]] == pytest.approx(1.00)
    assert kernel.configs_timings[CONFIGS[1]] == pytest.approx(0.97)
    assert kernel.configs_timings[CONFIGS[3]] == pytest.approx(2.00)  # not refined


def test_a_kernel_given_its_own_timer_is_timed_once_per_config():
    timer = Drifting(TRUTH, boosted=1)
    calls = []

    def do_bench(fn, quantiles=None):
        calls.append(fn)
        fn()
        return 1.0

    kernel = tessera.autotune(configs=CONFIGS, key=["n"], cache_results=False,
                              do_bench=do_bench)(scale_kernel)
    kernel.backend = fake = FakeBackend(timer)
    run(kernel)
    assert fake.benched == CONFIGS  # no rounds: the drifted pass decides, as in Triton
    assert kernel.best_config == CONFIGS[0]


def test_no_rounds_when_no_config_is_close_to_the_fastest():
    truth = {128: 1.0, 256: 1.2, 512: 1.5, 1024: 2.0}
    kernel = tessera.autotune(configs=CONFIGS, key=["n"], cache_results=False)(scale_kernel)
    kernel.backend = fake = FakeBackend(Drifting(truth, boosted=0))
    run(kernel)
    assert fake.benched == CONFIGS and kernel.best_config == CONFIGS[0]


def test_at_most_the_fastest_finalists_are_refined():
    truth = {128: 1.00, 256: 1.01, 512: 1.02, 1024: 1.03}
    configs = CONFIGS + [tessera.Config({"BLOCK": 1024}, num_warps=8)]
    truth_of = {**{c: truth[c.kwargs["BLOCK"]] for c in CONFIGS}, configs[4]: 1.04}
    kernel = tessera.autotune(configs=configs, key=["n"], cache_results=False)(scale_kernel)
    kernel.backend = fake = FakeBackend(lambda config: truth_of[config])
    run(kernel)
    refined = fake.benched[len(configs):]
    assert refined == configs[:tuner.REFINE_FINALISTS] * tuner.REFINE_ROUNDS
    assert kernel.best_config == configs[0]


def test_the_first_config_warms_the_gpu_before_the_pass_with_the_default_timer_only():
    kernel = tessera.autotune(configs=CONFIGS, key=["n"], cache_results=False)(scale_kernel)
    kernel.backend = fake = FakeBackend(Drifting(TRUTH, boosted=0))
    run(kernel)
    assert fake.warmed == [CONFIGS[0]]
    own = tessera.autotune(configs=CONFIGS, key=["n"], cache_results=False,
                           do_bench=lambda fn, quantiles=None: 1.0)(scale_kernel)
    own.backend = fake = FakeBackend(Drifting(TRUTH, boosted=0))
    run(own)
    assert fake.warmed == []
