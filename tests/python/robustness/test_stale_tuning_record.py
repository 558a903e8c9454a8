"""A tuning record on disk whose best config no longer compiles (the toolchain, a limit or a
heuristic changed since) gives a warning naming the kernel and the config, and the kernel is
tuned again instead of failing; a record whose best config still compiles is used as is."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "autotune"))
from fakes import FakeBackend  # noqa: E402

import tessera  # noqa: E402
import tessera.language as tl  # noqa: E402
from tessera.autotuner import results  # noqa: E402
from tessera.config import knobs  # noqa: E402


@tessera.jit(interpret=True)
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK <= 2048, "BLOCK too large")
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


CONFIGS = [tessera.Config({"BLOCK": b}, num_warps=4) for b in (256, 512, 4096)]


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path):
    knobs.cache_dir = str(tmp_path)
    knobs.autotune_progress = False
    knobs.autotune = ""
    yield tmp_path
    knobs.reset()


def fresh_kernel():
    kernel = tessera.autotune(configs=CONFIGS, key=["n"])(add_kernel)
    kernel.backend = FakeBackend(lambda c: 1.0 if c.kwargs["BLOCK"] == 256 else 2.0)
    return kernel


def launch(kernel, n):
    rng = np.random.default_rng()
    x, y = rng.standard_normal((2, n)).astype(np.float32)
    out = np.full(n, np.nan, dtype=np.float32)
    kernel[lambda meta: (tessera.cdiv(n, meta["BLOCK"]),)](x, y, out, n)
    np.testing.assert_array_equal(out, x + y)


def rewrite_stored_best(kernel, n, config):
    """Makes the stored record name ``config`` as best, as a record written before the
    config stopped compiling would."""
    target = kernel.backend.target(kernel.jit_fn, [])
    key = (n,) + tuple(None if name == "n" else np.dtype(np.float32)
                       for name in kernel.jit_fn.runtime_names)
    _, disk_key = kernel._disk_key(key, target)
    record = results.load(disk_key)
    assert record is not None, "the first launch stored a tuning record"
    record["best"] = config.to_json()
    results.store(disk_key, record)


def test_a_stored_best_config_that_no_longer_compiles_is_tuned_again():
    n = 1000
    first = fresh_kernel()
    launch(first, n)
    assert first.best_config.kwargs["BLOCK"] == 256
    rewrite_stored_best(first, n, CONFIGS[2])       # BLOCK=4096 fails its static_assert
    second = fresh_kernel()
    with pytest.warns(RuntimeWarning, match=r"(?s)add_kernel: the stored tuning result's best "
                                            r"config \(BLOCK: 4096.*\) no longer compiles "
                                            r"\(.*BLOCK too large.*\); tuning again"):
        launch(second, n)
    assert second.best_config.kwargs["BLOCK"] == 256
    assert len(second.backend.benched) == 2         # tuned again: 256 and 512 timed
    third = fresh_kernel()                          # the new record is good again
    launch(third, n)
    assert third.backend.benched == [] and third.best_config.kwargs["BLOCK"] == 256


def test_a_stored_best_config_that_compiles_is_used_without_tuning(recwarn):
    n = 777
    first = fresh_kernel()
    launch(first, n)
    rewrite_stored_best(first, n, CONFIGS[1])       # another good config
    second = fresh_kernel()
    launch(second, n)
    assert second.best_config.kwargs["BLOCK"] == 512
    assert second.backend.benched == [] and second.backend.compiled == []
    assert not [w for w in recwarn if "tuning" in str(w.message)]
