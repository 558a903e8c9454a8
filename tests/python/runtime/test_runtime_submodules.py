"""``triton.runtime.jit`` and ``triton.runtime.autotuner`` as modules, as libraries use them:
``from triton.runtime.jit import JITFunction`` (isinstance checks), and an ``Autotuner``
subclass built with Triton's argument order that overrides ``run`` and narrows ``self.configs``
before the first launch (a stored-best-config autotuner). Results against NumPy on ragged
sizes, in the interpreter."""
import importlib

import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera import runtime
from tessera.runtime.autotuner import Autotuner, Config, Heuristics
from tessera.runtime.jit import JITFunction, KernelInterface, jit


@pytest.fixture
def rng():
    return np.random.default_rng()


@jit(interpret=True)
def scale_kernel(x_ptr, y_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * factor, mask=mask)


def test_runtime_jit_is_a_module():
    assert importlib.import_module("tessera.runtime.jit") is runtime.jit
    assert isinstance(scale_kernel, JITFunction) and KernelInterface is JITFunction
    assert runtime.jit.JITFunction is tessera.JITFunction
    assert runtime.autotuner.Config is tessera.Config
    assert scale_kernel.arg_names == ["x_ptr", "y_ptr", "n", "factor", "BLOCK"]


class FirstSeen(Autotuner):
    """Keeps only the configs whose BLOCK is in ``allowed`` before the first launch, as a
    cache-backed autotuner replaces its configs with a stored best one."""
    allowed = (64,)

    def __init__(self, fn, arg_names, configs, key, reset_to_zero, restore_value, **kwargs):
        super().__init__(fn, arg_names, configs, key, reset_to_zero, restore_value, **kwargs)
        self.runs = 0

    def run(self, *args, **kwargs):
        if self.runs == 0:
            self.configs = [c for c in self.configs if c.kwargs["BLOCK"] in self.allowed]
        self.runs += 1
        return super().run(*args, **kwargs)


def test_autotuner_subclass_with_triton_argument_order(rng):
    configs = [Config({"BLOCK": 32}), Config({"BLOCK": 64}), Config({"BLOCK": 128})]
    tuned = FirstSeen(scale_kernel, scale_kernel.arg_names, configs, ["n"], None, None,
                      pre_hook=None, post_hook=None, prune_configs_by=None, warmup=None,
                      rep=None, use_cuda_graph=False, do_bench=None, cache_results=False)
    assert isinstance(tuned, tessera.Autotuner)
    for _ in range(2):
        n = int(rng.integers(1, 1000))
        x = rng.standard_normal(n).astype(np.float32)
        y = np.zeros(n, np.float32)
        tuned[lambda meta: (tessera.cdiv(n, meta["BLOCK"]),)](x, y, n, 1.5)
        np.testing.assert_allclose(y, x * np.float32(1.5), rtol=1e-6)
    assert tuned.runs == 2 and [c.kwargs["BLOCK"] for c in tuned.configs] == [64]


def test_decorated_kernels_are_runtime_instances():
    tuned = tessera.autotune([Config({"BLOCK": 32})], key=["n"])(scale_kernel)
    assert isinstance(tuned, Autotuner) and not isinstance(scale_kernel, Autotuner)
    with_heuristics = tessera.heuristics({"BLOCK": lambda args: 32})(scale_kernel)
    assert isinstance(with_heuristics, Heuristics) and not isinstance(tuned, Heuristics)


def test_heuristics_with_triton_argument_order(rng):
    tuned = Heuristics(scale_kernel, scale_kernel.arg_names,
                       {"BLOCK": lambda args: tessera.next_power_of_2(args["n"])})
    n = int(rng.integers(1, 300))
    x = rng.standard_normal(n).astype(np.float32)
    y = np.zeros(n, np.float32)
    tuned[(1,)](x, y, n, -2.0)  # one program: BLOCK covers n
    np.testing.assert_allclose(y, x * np.float32(-2.0), rtol=1e-6)


def test_wrong_arg_names_are_an_error():
    with pytest.raises(TypeError, match="arg_names"):
        Autotuner(scale_kernel, ["x", "y"], [Config({"BLOCK": 32})], ["n"], None, None)
