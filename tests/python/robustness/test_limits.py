"""Limits enforced at trace time and launch: tiles of more than 2**20 elements (made by any
op, broadcasts included) fail at their source line in well under a second instead of hanging
codegen; f-strings of tensors are refused as in Triton; the interpreter applies a GPU's grid
limits, so no kernel works only on the CPU."""
import time

import numpy as np
import pytest
import tessera
import tessera.language as tl
from tessera.errors import CompilationError
from tessera.interpreter import KernelRuntimeError

SOURCE = open(__file__).read().splitlines()


def line_of(snippet):
    return next(i + 1 for i, text in enumerate(SOURCE) if snippet in text)


@tessera.jit
def huge_range(x_ptr, N: tl.constexpr):
    r = tl.arange(0, N)  # huge-range
    tl.store(x_ptr + r, r)


@tessera.jit
def huge_broadcast(x_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    square = r[:, None] + r[None, :]  # huge-broadcast
    tl.store(x_ptr + tl.arange(0, 16), tl.sum(tl.sum(square, 1), 0))


@tessera.jit
def huge_zeros(x_ptr):
    z = tl.zeros((2048, 1024), dtype=tl.float32)  # huge-zeros
    tl.store(x_ptr, tl.sum(tl.sum(z, 1), 0))


@tessera.jit
def formats_a_tensor(x_ptr):
    v = tl.load(x_ptr)
    tl.static_print(f"value {v}")  # f-string


@pytest.mark.parametrize("kernel, args, snippet", [
    (huge_range, {"N": 2 ** 24}, "huge-range"),
    (huge_broadcast, {"N": 32768}, "huge-broadcast"),
    (huge_zeros, {}, "huge-zeros"),
])
def test_oversized_tiles_fail_fast_at_their_line(kernel, args, snippet):
    start = time.perf_counter()
    with pytest.raises(CompilationError) as info:
        kernel.asm(np.zeros(16, np.int32), **args)
    assert time.perf_counter() - start < 5
    error = info.value
    assert error.kernel_name == kernel.__name__ and error.lineno == line_of(snippet)
    assert "2**20" in str(error)


def test_largest_tile_is_accepted():
    # 2**20 elements is the limit itself: tracing accepts it (no code generation here).
    from tessera.frontend import build_module
    module = build_module(huge_range.fn, {"x_ptr": "*i32"}, {"N": 2 ** 20})
    assert "make_range" in str(module)


def test_fstring_of_a_tensor_is_refused():
    with pytest.raises(CompilationError, match="f-string") as info:
        formats_a_tensor.asm(np.zeros(4, np.float32))
    assert info.value.lineno == line_of("# f-string")


@tessera.jit(interpret=True)
def store_pid(x_ptr):
    tl.store(x_ptr + tl.program_id(1), tl.program_id(1))


@pytest.mark.parametrize("grid, message", [
    ((1, 65536), "axis 1 has 65536 programs"),
    ((1, 1, 70000), "axis 2 has 70000 programs"),
    ((2 ** 31,), "axis 0 has 2147483648 programs"),
    ((2.0,), "non-negative integers"),
    ((-1,), "non-negative integers"),
    ((), "non-negative integers"),
])
def test_interpreter_applies_gpu_grid_limits(grid, message):
    with pytest.raises(KernelRuntimeError, match=message) as info:
        store_pid[grid](np.zeros(4, np.int32))
    assert "store_pid" in str(info.value)


def test_largest_grid_axis_runs():
    x = np.zeros(65535, np.int32)
    store_pid[(1, 65535)](x)
    assert x[-1] == 65534
