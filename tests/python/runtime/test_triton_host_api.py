"""Triton's host API with `import tessera as triton`: next_power_of_2 (Triton's exact results),
the exception classes Triton code catches, triton.knobs, driver.active without a GPU, and the
error for Triton names Tessera lacks (host side; kernels: test_triton_api_table.py)."""
import pickle
import random

import numpy as np
import pytest

import tessera as triton
import tessera.language as tl
from tessera import _triton_api
from tessera.config import knobs
from tessera.errors import TritonAPINotSupported
from tessera.runtime import driver
from tessera.testing.environment import child_env


def reference_next_power_of_2(n: int) -> int:
    """Triton's documented result: the smallest power of 2 >= n, for 1 <= n <= 2**64; its bit
    smearing gives 0 for n <= 0."""
    return 0 if n <= 0 else 1 << (n - 1).bit_length()


def test_next_power_of_2_matches_triton():
    rng = random.Random()
    cases = [0, 1, 2, 3, 4, 5, 7, 8, 9, 1023, 1024, 1025, 2**31 - 1, 2**31, 2**32 + 1, 2**63,
             2**64, -1, -5, -(2**40)]
    cases += [rng.randrange(1, 2**64) for _ in range(200)]
    cases += [2**k + d for k in range(1, 64) for d in (-1, 0, 1)]
    for n in cases:
        assert triton.next_power_of_2(n) == reference_next_power_of_2(n), n
    assert triton.cdiv(10, 3) == 4


def test_next_power_of_2_inside_a_kernel_on_constexprs():
    @triton.jit(interpret=True)
    def fill(out_ptr, N: tl.constexpr):
        BLOCK: tl.constexpr = triton.next_power_of_2(N)
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.full((BLOCK,), BLOCK, tl.int32), mask=offs < N)

    for n in (1, 5, 16, 33):
        out = np.zeros(n, np.int32)
        fill[(1,)](out, N=n)
        np.testing.assert_array_equal(out, np.full(n, reference_next_power_of_2(n)))


def test_exception_classes_triton_code_catches():
    from tessera.compiler.errors import CompilationError as CompilerPathError
    from tessera.runtime.errors import OutOfResources, PTXASError
    from tessera.compiler.ptxas import PtxasError
    from tessera.interpreter.errors import KernelAssertionError, KernelRuntimeError

    assert CompilerPathError is triton.CompilationError is triton.compiler.CompilationError
    for cls in (triton.CompilationError, triton.OutOfResources, triton.InterpreterError,
                PTXASError, KernelRuntimeError, KernelAssertionError, PtxasError):
        assert issubclass(cls, triton.TritonError), cls
    assert issubclass(KernelRuntimeError, triton.InterpreterError)
    assert issubclass(PtxasError, PTXASError) and issubclass(PtxasError, RuntimeError)
    error = OutOfResources(300000, 232448, "shared memory")
    assert str(error).startswith("out of resource: shared memory, Required: 300000, "
                                 "Hardware limit: 232448")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.required, copy.limit, copy.name) == (300000, 232448, "shared memory")


def test_a_kernel_error_is_caught_as_triton_error():
    @triton.jit(interpret=True)
    def bad(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs) + "text")

    with pytest.raises(triton.TritonError) as info:
        bad[(1,)](np.zeros(4, np.float32), BLOCK=4)
    assert isinstance(info.value, triton.compiler.errors.CompilationError)

    @triton.jit(interpret=True)
    def out_of_bounds(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs))

    with pytest.raises(triton.InterpreterError):
        out_of_bounds[(1,)](np.zeros(4, np.float32), BLOCK=8)


def test_knobs_map_onto_tessera_config():
    try:
        triton.knobs.runtime.interpret = True
        assert knobs.interpret is True and triton.knobs.runtime.interpret is True
        triton.knobs.runtime.interpret = False
        assert knobs.interpret is False
        assert triton.knobs.cache.dir == knobs.cache_dir
        triton.knobs.runtime.debug = True
        assert knobs.debug is True
    finally:
        knobs.reset("interpret")
        knobs.reset("debug")
    assert triton.knobs.runtime.launch_enter_hook is None
    triton.knobs.runtime.launch_enter_hook = None          # Triton's default: accepted
    with pytest.raises(TritonAPINotSupported, match=r"triton\.knobs\.runtime\.launch_enter_"):
        triton.knobs.runtime.launch_enter_hook = print
    with pytest.raises(TritonAPINotSupported, match=r"triton\.knobs\.nvidia"):
        triton.knobs.nvidia


def test_knob_namespace_scopes_restore_what_was_there(tmp_path):
    # As Triton's knobs.cache.scope(): settings made inside are undone on leaving, back to an
    # earlier setting or to the environment's value.
    outside = knobs.cache_dir
    with triton.knobs.cache.scope(), triton.knobs.runtime.scope():
        triton.knobs.cache.dir = str(tmp_path)
        triton.knobs.runtime.debug = True
        assert knobs.cache_dir == str(tmp_path) and knobs.debug is True
    assert knobs.cache_dir == outside and "cache_dir" not in knobs._overrides
    assert "debug" not in knobs._overrides
    try:
        knobs.interpret = True
        with pytest.raises(RuntimeError, match="inside"):
            with triton.knobs.runtime.scope():
                triton.knobs.runtime.interpret = False
                raise RuntimeError("inside")
        assert knobs.interpret is True
    finally:
        knobs.reset("interpret")


no_gpu = pytest.mark.skipif(driver.driver_available()[0], reason="a CUDA driver is present")


@no_gpu
def test_driver_active_without_a_gpu():
    active = triton.runtime.driver.active
    assert active.get_current_device() == 0 and active.get_current_stream() == 0
    assert not active.is_active()
    with knobs.scope(interpret=False):
        with pytest.raises(RuntimeError, match="no GPU.*TESSERA_INTERPRET=1"):
            active.get_current_target()
        with pytest.raises(RuntimeError, match="get_device_properties.*no GPU"):
            active.utils.get_device_properties(0)
    with knobs.scope(interpret=True):
        target = active.get_current_target()
        assert (target.backend, target.arch, target.warp_size) == ("cuda", 90, 32)
        props = active.utils.get_device_properties(active.get_current_device())
        assert props["multiprocessor_count"] == 132 and props["warpSize"] == 32
        assert set(props) >= {"max_shared_mem", "max_num_regs", "multiprocessor_count",
                              "warpSize", "sm_clock_rate", "mem_clock_rate", "mem_bus_width"}


def test_driver_set_and_reset_active():
    class Stub:
        pass

    stub = Stub()
    triton.runtime.driver.set_active(stub)
    try:
        assert triton.runtime.driver.active is stub
    finally:
        triton.runtime.driver.reset_active()
    assert triton.runtime.driver.active is triton.runtime.driver.default


def missing(namespace):
    names = [n for n in _triton_api.names()[namespace]
             if _triton_api.status(namespace, n) == "not yet"]
    if not names:
        pytest.skip(f"every name of {namespace} is supported")
    return names


@pytest.mark.parametrize("namespace, module", [("triton", triton), ("triton.language", tl),
                                               ("triton.testing", triton.testing),
                                               ("triton.runtime", triton.runtime)])
def test_a_missing_triton_name_says_it_is_a_triton_api(namespace, module):
    for name in missing(namespace):
        with pytest.raises(TritonAPINotSupported,
                           match=rf"{namespace}\.{name} is a Triton API that Tessera does not "
                                 "support yet"):
            getattr(module, name)
        assert not hasattr(module, name)
        assert getattr(module, name, "default") == "default"
    with pytest.raises(AttributeError) as info:
        getattr(module, "surely_not_a_triton_name")
    assert not isinstance(info.value, TritonAPINotSupported)


def test_runtime_exposes_triton_runtime_names():
    assert triton.runtime.JITFunction is triton.JITFunction
    assert triton.runtime.Config is triton.Config and triton.runtime.autotune is triton.autotune
    assert triton.runtime.OutOfResources is triton.OutOfResources
    assert triton.runtime.MockTensor is triton.MockTensor


def test_constexpr_function_runs_at_compile_time_in_kernels():
    @triton.constexpr_function
    def block_for(n, cap=64):
        return min(cap, triton.next_power_of_2(n))

    @triton.jit(interpret=True)
    def fill(out_ptr, N: tl.constexpr):
        BLOCK: tl.constexpr = block_for(N)
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.full((BLOCK,), BLOCK, tl.int32), mask=offs < N)

    assert block_for(100) == 64 and block_for(3, cap=2) == 2    # plain call on the host
    for n in (3, 40, 64):
        out = np.zeros(n, np.int32)
        fill[(1,)](out, N=n)
        np.testing.assert_array_equal(out, np.full(n, min(64, reference_next_power_of_2(n))))

    @triton.jit(interpret=True)
    def runtime_arg(out_ptr, n):
        tl.store(out_ptr, block_for(tl.load(out_ptr)))

    with pytest.raises(triton.CompilationError, match="block_for.*compile time"):
        runtime_arg[(1,)](np.zeros(1, np.int32), 1)


def test_subpackages_are_reachable_as_attributes_in_a_fresh_process():
    import subprocess
    import sys
    code = ("import tessera as triton\n"
            "assert triton.compiler.errors.CompilationError is triton.CompilationError\n"
            "assert triton.runtime.driver.active is triton.runtime.driver.default\n"
            "assert triton.runtime.errors.OutOfResources is triton.OutOfResources\n"
            "print('ok')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=child_env())
    assert done.stdout.strip() == "ok", done.stderr
