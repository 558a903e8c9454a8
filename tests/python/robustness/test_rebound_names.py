"""Every name whose rebinding changes a kernel's code gives a new kernel on every path, not only
a module-level tl.constexpr (test_rebound_globals.py): a dtype global, a variable of an
enclosing function (a closure cell), a class attribute, a tessera.constexpr_function and the
plain globals it reads; and callers of the source key other than a launch (warmup, which
stores the cubin on disk under that key) see the new value. No GPU: the launch paths prepare
recording launchers (tests/python/jit); warmup compiles on the CPU with ptxas."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "jit"))
from launch_fakes import FakeGpu, fast_launch_count  # noqa: E402

import tessera  # noqa: E402
import tessera.language as tl  # noqa: E402
from tessera.compiler import ptxas  # noqa: E402
from tessera.config import knobs  # noqa: E402
from tessera.runtime import launcher  # noqa: E402
from tessera.runtime.kernel_cache import KernelCache  # noqa: E402
from tessera.warmup import stand_in  # noqa: E402

DT = tl.float16
FACT = tl.constexpr(3.0)
LIMIT = 3.0


class Cfg:
    SCALE = tl.constexpr(3.0)


@tessera.jit
def round_trip(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask).to(DT).to(tl.float32), mask=mask)


@tessera.jit
def scale_by_class(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * Cfg.SCALE, mask=mask)


@tessera.constexpr_function
def factor():
    return LIMIT


@tessera.jit
def scale_by_function(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    scale: tl.constexpr = factor()
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * scale, mask=mask)


@tessera.jit
def scale_by_fact(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * FACT, mask=mask)


def make_closure_kernel():
    """A kernel reading a variable of its enclosing function, and a way to rebind it."""
    scale = tl.constexpr(3.0)

    @tessera.jit
    def scale_by_cell(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * scale, mask=mask)

    def rebind(value):
        nonlocal scale
        scale = value
    return scale_by_cell, rebind


def set_global(name, value):
    globals()[name] = value


def set_class_scale(value):
    Cfg.SCALE = value


# (kernel or a maker of (kernel, rebind), rebind(value), first value, second value,
#  reference(x, value))
CASES = {
    "dtype global": (round_trip, lambda v: set_global("DT", v), tl.float16, tl.float32,
                     lambda x, v: x.astype(np.float16 if v == tl.float16 else np.float32)),
    "closure variable": (make_closure_kernel, None, tl.constexpr(3.0), tl.constexpr(7.0),
                         lambda x, v: x * v.value),
    "class attribute": (scale_by_class, set_class_scale, tl.constexpr(3.0), tl.constexpr(7.0),
                        lambda x, v: x * v.value),
    "global read by a constexpr_function": (scale_by_function,
                                            lambda v: set_global("LIMIT", v), 3.0, 7.0,
                                            lambda x, v: x * v),
}


def kernel_and_rebind(case):
    kernel, rebind, first, _, _ = CASES[case]
    if rebind is None:
        kernel, rebind = kernel()
    rebind(first)
    return kernel, rebind


@pytest.fixture
def restore():
    yield
    set_global("DT", tl.float16)
    set_global("FACT", tl.constexpr(3.0))
    set_global("LIMIT", 3.0)
    set_class_scale(tl.constexpr(3.0))


@pytest.fixture
def gpu(monkeypatch, restore):
    knobs.interpret = False
    yield FakeGpu(monkeypatch)
    knobs.reset("interpret")


@pytest.mark.parametrize("case", sorted(CASES))
def test_rebinding_recompiles_on_the_fast_path(gpu, case):
    torch = pytest.importorskip("torch")
    kernel, rebind = kernel_and_rebind(case)
    second = CASES[case][3]
    x = torch.randn(64)
    kernel._kernels.clear()
    kernel._dispatch_clear()
    for _ in range(3):
        kernel[(1,)](x, x, 50, BLOCK=64)
    fast = fast_launch_count(kernel)
    assert len(gpu.prepared) == 1 and fast >= 2
    rebind(second)
    kernel[(1,)](x, x, 50, BLOCK=64)
    assert len(gpu.prepared) == 2, f"{case}: the kernel compiled for the old value was served"
    kernel[(1,)](x, x, 50, BLOCK=64)  # the new kernel is launched from C++ again
    assert fast_launch_count(kernel) == fast + 1 and len(gpu.prepared) == 2


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_interpreter_uses_the_new_value(restore, case):
    kernel, rebind = kernel_and_rebind(case)
    _, _, first, second, reference = CASES[case]
    x = (np.random.default_rng().standard_normal(50) * 10).astype(np.float32)
    y = np.empty_like(x)
    kernel.interpret = True
    try:
        for value in (first, second):
            rebind(value)
            kernel[(1,)](x, y, 50, BLOCK=64)
            np.testing.assert_array_equal(y, reference(x, value).astype(np.float32))
    finally:
        kernel.interpret = None


def cached_ptx(kernel, arguments, constexprs):
    """The PTX that the disk cache holds for a launch of ``kernel`` with the globals as they
    are now (what a launch in this process or a fresh one would load)."""
    options, kwargs, _ = kernel._split_launch(dict(constexprs))
    _, constexpr_values, keys = kernel._arguments([stand_in(a) for a in arguments], kwargs)
    key = launcher.kernel_cache_key(kernel, kernel._specialization(keys),
                                    kernel._constexpr_dict(constexpr_values, keys),
                                    options.compile_options(launcher.default_arch()))
    entry = KernelCache().get(key)
    return None if entry is None else entry["kernel.ptx"].decode()


@pytest.mark.skipif(ptxas.find_ptxas() is None, reason="ptxas not installed")
def test_warmup_stores_each_value_under_its_own_key(restore, tmp_path):
    # 3.0 is 0f40400000 in PTX, 7.0 0f40E00000. Before the fix, the second warmup compiled
    # x * 7.0 but stored it under the key of 3.0, which later launches of 3.0 then loaded.
    knobs.cache_dir = str(tmp_path)
    arguments, constexprs = ("*fp32", "*fp32", "i32"), {"BLOCK": 64}
    try:
        scale_by_fact.warmup(*arguments, grid=(1,), **constexprs)
        set_global("FACT", tl.constexpr(7.0))
        compiled = scale_by_fact.warmup(*arguments, grid=(1,), **constexprs)
        assert "0f40E00000" in compiled.asm["ptx"]
        assert "= 7.0" in scale_by_fact.source_key()
        assert "0f40E00000" in cached_ptx(scale_by_fact, arguments, constexprs)
        set_global("FACT", tl.constexpr(3.0))  # back to the first value (a new object)
        ptx = cached_ptx(scale_by_fact, arguments, constexprs)
        assert "0f40400000" in ptx and "0f40E00000" not in ptx
    finally:
        knobs.reset("cache_dir")
