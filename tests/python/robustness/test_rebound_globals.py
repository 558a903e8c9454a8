"""A tl.constexpr global (or a @jit helper) rebound after a kernel was compiled, as running a
notebook cell again does, must give a new kernel on every launch path: the Python path and the
C++ fast path, which checks the globals the kernel read (recorded with its source key) before
each launch. No GPU: kernels are prepared into recording launchers (tests/python/jit)."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "jit"))
from launch_fakes import FakeGpu, fast_launch_count  # noqa: E402

import tessera  # noqa: E402
import tessera.language as tl  # noqa: E402
from tessera.config import knobs  # noqa: E402

FACT = tl.constexpr(2.0)


@tessera.jit
def scale_by_fact(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * FACT, mask=mask)


@pytest.fixture
def gpu(monkeypatch):
    knobs.interpret = False
    yield FakeGpu(monkeypatch)
    knobs.reset("interpret")
    globals()["FACT"] = tl.constexpr(2.0)


def test_rebinding_a_constexpr_global_recompiles_on_the_fast_path(gpu):
    torch = pytest.importorskip("torch")
    x = torch.randn(64)
    kernel = scale_by_fact
    kernel._kernels.clear()
    kernel._dispatch_clear()
    for _ in range(3):
        kernel[(1,)](x, x, 50, BLOCK=64)
    fast = fast_launch_count(kernel)
    assert len(gpu.prepared) == 1 and fast >= 2 and "= 2.0" in kernel.source_key()
    globals()["FACT"] = tl.constexpr(7.0)         # the cell run again with a new value
    kernel[(1,)](x, x, 50, BLOCK=64)
    assert fast_launch_count(kernel) == fast, "the fast path served the kernel of FACT=2.0"
    assert len(gpu.prepared) == 2 and "= 7.0" in kernel.source_key()
    kernel[(1,)](x, x, 50, BLOCK=64)               # the new kernel is fast again
    assert fast_launch_count(kernel) == fast + 1 and len(gpu.prepared) == 2
    globals()["FACT"] = tl.constexpr(7.0)         # a new object, the same value: no recompile
    kernel[(1,)](x, x, 50, BLOCK=64)
    kernel[(1,)](x, x, 50, BLOCK=64)
    assert len(gpu.prepared) == 2 and fast_launch_count(kernel) == fast + 2


def test_the_python_path_checks_the_globals_too(gpu):
    np_x = np.arange(64, dtype=np.float32)
    kernel = scale_by_fact
    kernel._kernels.clear()
    kernel._dispatch_clear()
    kernel.run(np_x, np_x, 50, BLOCK=64, grid=(1,))
    key = kernel.source_key()
    globals()["FACT"] = tl.constexpr(3.0)
    kernel.run(np_x, np_x, 50, BLOCK=64, grid=(1,))
    assert kernel.source_key() != key and "= 3.0" in kernel.source_key()
    assert len(gpu.prepared) == 2


def test_the_interpreter_uses_the_new_value():
    x = np.random.default_rng().standard_normal(50).astype(np.float32)
    y = np.empty_like(x)
    globals()["FACT"] = tl.constexpr(2.0)
    scale_by_fact.interpret = True
    try:
        scale_by_fact[(1,)](x, y, 50, BLOCK=64)
        np.testing.assert_allclose(y, x * 2.0, rtol=1e-6)
        globals()["FACT"] = tl.constexpr(7.0)
        scale_by_fact[(1,)](x, y, 50, BLOCK=64)
        np.testing.assert_allclose(y, x * 7.0, rtol=1e-6)
    finally:
        scale_by_fact.interpret = None
        globals()["FACT"] = tl.constexpr(2.0)
