"""autotune(spills="avoid"): a config whose kernel spills registers (ptxas's figures, the real
compiler) is not timed when another config compiled without spills, and says why; "allow"
(Triton's rule, the default) times it; when every config spills, all are timed."""
import numpy as np
import pytest
import tessera
import tessera.language as tl
from fakes import FakeBackend
from tessera.compiler import ptxas

pytestmark = pytest.mark.skipif(ptxas.find_ptxas() is None,
                                reason="ptxas not installed: no spill figures")


@tessera.jit(interpret=True)
def column_sums_kernel(x_ptr, out_ptr, n, rows, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.zeros([BLOCK], tl.float32)
    squares = tl.zeros([BLOCK], tl.float32)
    for r in range(rows):
        x = tl.load(x_ptr + r * n + offs, mask=mask, other=0.0)
        acc += x
        squares += x * x
    tl.store(out_ptr + offs, acc * squares, mask=mask)


# One warp holds 2048 / 32 = 64 values of each accumulator: 128 live registers at least, so a
# cap of 32 registers spills and no cap does not.
CAPPED = tessera.Config({"BLOCK": 2048}, num_warps=1, maxnreg=32)
UNCAPPED = tessera.Config({"BLOCK": 2048}, num_warps=1)
SMALL_CAPPED = tessera.Config({"BLOCK": 1024}, num_warps=1, maxnreg=40)


def run(configs, times, **options):
    kernel = tessera.autotune(configs=configs, key=["n"], cache_results=False,
                              **options)(column_sums_kernel)
    kernel.backend = FakeBackend(lambda config: times[config])
    rng = np.random.default_rng()
    n, rows = 2048 + int(rng.integers(1, 2000)), 3
    x = rng.standard_normal((rows, n)).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    kernel[lambda meta: (tessera.cdiv(n, meta["BLOCK"]),)](x, out, n, rows)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(out, x64.sum(0) * (x64 * x64).sum(0), rtol=1e-4, atol=1e-4)
    return kernel


def test_avoid_skips_a_spilling_config_even_when_it_times_fastest():
    kernel = run([CAPPED, UNCAPPED], {CAPPED: 0.1, UNCAPPED: 1.0}, spills="avoid")
    assert kernel.best_config is UNCAPPED
    assert kernel.backend.benched and CAPPED not in kernel.backend.benched
    reasons = dict(kernel.failed_configs)
    assert "spills" in reasons[CAPPED] and "spills='avoid'" in reasons[CAPPED]


def test_allow_is_the_default_and_times_every_config():
    kernel = run([CAPPED, UNCAPPED], {CAPPED: 0.1, UNCAPPED: 1.0})
    assert kernel.best_config is CAPPED and kernel.failed_configs == []


def test_when_every_config_spills_all_are_timed():
    kernel = run([CAPPED, SMALL_CAPPED], {CAPPED: 0.5, SMALL_CAPPED: 0.2}, spills="avoid")
    assert set(kernel.backend.benched) >= {CAPPED, SMALL_CAPPED}
    assert kernel.best_config is SMALL_CAPPED and kernel.failed_configs == []


def test_an_unknown_rule_is_refused():
    with pytest.raises(ValueError, match="spills='never'"):
        tessera.autotune(configs=[UNCAPPED], key=["n"], spills="never")(column_sums_kernel)
