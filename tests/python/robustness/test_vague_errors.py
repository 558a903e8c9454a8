"""Bad arguments, grids and settings give errors that name the kernel and the argument or
setting, on the GPU path (checked before anything needs a GPU) and in the interpreter alike."""
import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.config import knobs


@tessera.jit
def bump(x_ptr, n, B: tl.constexpr):
    offs = tl.arange(0, 16)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + n)


@pytest.fixture(params=[True, False], ids=["interpret", "gpu-path"])
def mode(request):
    knobs.interpret = request.param
    yield request.param
    knobs.reset("interpret")


def test_an_int_too_large_for_64_bits_names_the_argument(mode):
    x = np.zeros(16, np.float32)
    with pytest.raises(OverflowError, match=r"bump: argument 'n': integer 2\*\*64|bump: argument "
                                            r"'n': integer 18446744073709551616"):
        bump[(1,)](x, 2**64, B=1)
    with pytest.raises(OverflowError, match="bump: argument 'n'"):
        bump[(1,)](x, -2**63 - 1, B=1)


def test_an_unhashable_constexpr_names_the_parameter(mode):
    x = np.zeros(16, np.float32)
    with pytest.raises(TypeError, match="bump: constexpr parameter 'B' got list .* not hashable"):
        bump[(1,)](x, 1, B=[1, 2])


@pytest.mark.parametrize("grid, said", [
    ("ab", "got str 'ab'"),
    ({"x": 1}, "got dict"),
    (lambda meta: None, "the grid callable returned NoneType None"),
    (lambda meta: "ab", "the grid callable returned str 'ab'"),
    (lambda meta: 2.5, "the grid callable returned float 2.5"),
])
def test_a_grid_of_the_wrong_type_names_the_kernel(mode, grid, said):
    x = np.zeros(16, np.float32)
    with pytest.raises(TypeError, match=f"bump: the grid must be an int or a tuple .*{said}"):
        bump[grid](x, 1, B=1)


def test_a_lambda_is_not_a_kernel(monkeypatch):
    with pytest.raises(TypeError, match="a kernel must be a def with source, not a lambda"):
        tessera.jit(lambda x_ptr: None)
    with pytest.raises(TypeError, match="not a lambda"):
        tessera.jit(interpret=True)(lambda x_ptr: None)
    # The refused kernel must not leave other kernels off the C++ fast path for good.
    import os
    import sys
    torch = pytest.importorskip("torch")
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "jit"))
    from launch_fakes import FakeGpu, fast_launch_count
    knobs.interpret = False
    try:
        FakeGpu(monkeypatch)
        x = torch.zeros(16)
        for _ in range(3):
            bump[(1,)](x, 1, B=3)
        assert fast_launch_count(bump) >= 2
    finally:
        knobs.reset("interpret")
        bump._kernels.clear()
        bump._dispatch_clear()


@pytest.mark.parametrize("arch", ["sm_70", "sm_75", "compute_90", "sm90", "gfx90a", "sm_80b"])
def test_an_unsupported_arch_lists_the_supported_ones(arch):
    x = np.zeros(16, np.float32)
    with pytest.raises(ValueError, match=f"bump: unsupported arch '{arch}': Tessera compiles "
                                         r"for sm_80 and newer \(sm_80, .*sm_90a"):
        bump.compile(x, 1, B=1, arch=arch)


@pytest.mark.parametrize("num_warps", [3, 0, -4, 64, 6, 2.0, True])
def test_num_warps_must_be_a_power_of_two_up_to_32(mode, num_warps):
    x = np.zeros(16, np.float32)
    with pytest.raises(ValueError, match=f"bump: launch option num_warps={num_warps!r}: must be "
                                         "a power of two from 1 to 32"):
        bump[(1,)](x, 1, B=1, num_warps=num_warps)


@pytest.mark.parametrize("num_stages", [-1, -8, 65, 1.5])
def test_num_stages_out_of_range_is_refused(mode, num_stages):
    x = np.zeros(16, np.float32)
    with pytest.raises(ValueError, match=f"bump: launch option num_stages={num_stages!r}"):
        bump[(1,)](x, 1, B=1, num_stages=num_stages)


def test_good_settings_still_run_in_the_interpreter():
    x = np.random.default_rng().standard_normal(16).astype(np.float32)
    expected = x.astype(np.float64) + 3
    bump.interpret = True
    try:
        bump[lambda meta: (1,)](x, 3, B=1, num_warps=32, num_stages=0)
    finally:
        bump.interpret = None
    np.testing.assert_allclose(x, expected, rtol=1e-6)


@pytest.mark.parametrize("grid, said", [
    ("ab", "got str 'ab'"),
    (lambda meta: None, "the grid callable returned NoneType None"),
    (lambda meta: "ab", "str 'ab'"),
])
def test_a_bad_grid_after_the_fast_path_took_over_names_the_kernel(monkeypatch, grid, said):
    """Once a specialization launches from C++ (cpp/bindings/launch.cpp), a bad grid falls
    back to the Python path, which explains it (a callable returning None is not 'no grid')."""
    import os
    import sys
    torch = pytest.importorskip("torch")
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "jit"))
    from launch_fakes import FakeGpu, fast_launch_count
    knobs.interpret = False
    try:
        FakeGpu(monkeypatch)

        @tessera.jit
        def bump_fast(x_ptr, n, B: tl.constexpr):
            offs = tl.arange(0, 16)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs) + n)

        x = torch.zeros(16)
        for _ in range(3):
            bump_fast[(1,)](x, 1, B=2)
        assert fast_launch_count(bump_fast) >= 2
        with pytest.raises(TypeError,
                           match=f"bump_fast: the grid must be an int or a tuple .*{said}"):
            bump_fast[grid](x, 1, B=2)
    finally:
        knobs.reset("interpret")


def test_a_grid_with_a_bad_dimension_names_the_kernel():
    """A tuple grid holding a non-int reaches the launcher's own check; its message gains the
    kernel's name (a launcher without a kernel: no GPU needed)."""
    from tessera.runtime import driver, launcher

    prepared = launcher.Launchable("scale_rows", driver.KernelLauncher(["i32"], None, 4), 0,
                                   "other", ["n"], {})
    prepared.current_stream = lambda: 0
    with pytest.raises(ValueError, match=r"scale_rows: grid dimension 1 must be an int >= 0, "
                                         r"got 'a'"):
        prepared.launch((1, "a"), [3])
