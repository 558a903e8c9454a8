# tl.device_print / print() and tl.device_assert / assert in kernels: the front end builds
# `print` and `assert` ops, the interpreter prints Triton's per-element format and raises
# KernelAssertionError naming kernel, program id, line and message (asserts in debug mode:
# test_interpreter_debug_flag.py); the cleanup passes keep both ops; tl.static_print prints at
# compile time.
import inspect

import ml_dtypes
import numpy as np
import pytest
import tessera
import tessera.language as tl
from tessera import frontend, interpreter
from tessera._tessera import passes
from tessera.errors import CompilationError, CompileTimeAssertionFailure
from tessera.interpreter import KernelAssertionError, KernelRuntimeError


def line_of(fn, marker: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, text in enumerate(lines) if marker in text)


def expected_lines(prefix: str, values, pid=(0, 0, 0), fmt=None, operand=None):
    """Independent reference of Triton's format, from NumPy's own iteration order."""
    values = np.asarray(values)
    fmt = fmt or (lambda v: f"{float(v):f}" if values.dtype.kind == "f" else str(int(v)))
    widths = [len(str(n - 1)) if n > 1 else 0 for n in values.shape]
    out = []
    for index in np.ndindex(*values.shape):
        idx = ", ".join(str(i).rjust(w) for i, w in zip(index, widths))
        tag = f"(operand {operand}) " if operand is not None else ""
        out.append(f"pid ({pid[0]}, {pid[1]}, {pid[2]}) idx ({idx}){prefix}{tag}"
                   f"{fmt(values[index])}")
    return out


@tessera.jit(interpret=True)
def print_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=-1.0)
    tl.device_print("x", x)


def test_device_print_prints_every_element_with_pid_and_index(capsys, rng):
    x = rng.standard_normal(12).astype(np.float32)
    capsys.readouterr()  # the rng fixture prints its seed
    print_kernel[(2,)](x, 12, BLOCK=8)
    padded = np.concatenate([x, np.full(4, -1.0, np.float32)])
    expected = (expected_lines(" x: ", padded[:8], (0, 0, 0)) +
                expected_lines(" x: ", padded[8:], (1, 0, 0)))
    assert capsys.readouterr().out.splitlines() == expected


@tessera.jit(interpret=True)
def print_2d_kernel(x_ptr, s, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.arange(0, BM)[:, None]
    cols = tl.arange(0, BN)[None, :]
    x = tl.load(x_ptr + rows * BN + cols)
    print("tile", x, s)  # Python's print is tl.device_print


def test_print_of_two_values_numbers_operands_and_pads_indices(capsys):
    x = np.arange(16 * 2, dtype=np.int32).reshape(16, 2) - 5
    print_2d_kernel[(1,)](x, -3, BM=16, BN=2)
    expected = (expected_lines(" tile: ", x, operand=0) +
                expected_lines(" tile: ", np.int32(-3), operand=1))
    lines = capsys.readouterr().out.splitlines()
    assert lines == expected
    assert lines[0] == "pid (0, 0, 0) idx ( 0, 0) tile: (operand 0) -5"
    assert lines[-1] == "pid (0, 0, 0) idx () tile: (operand 1) -3"


@tessera.jit(interpret=True)
def print_kinds_kernel(u_ptr, h_ptr, b_ptr):
    r = tl.arange(0, 4)
    u = tl.load(u_ptr + r)
    tl.device_print("u", u)
    tl.device_print("uhex", u, hex=True)
    tl.device_print("hhex", tl.load(h_ptr + r), hex=True)
    tl.device_print("b", tl.load(b_ptr + r))
    tl.device_print("just text")


def test_unsigned_hex_bf16_and_bool_values(capsys):
    u = np.array([0, 1, 2**32 - 1, 2**31], np.uint32)
    h = np.array([1.0, -2.0, 0.5, np.inf], ml_dtypes.bfloat16)
    b = np.array([True, False, True, True])
    print_kinds_kernel[(1,)](u, h, b)
    bits = h.view(np.uint16)
    expected = (expected_lines(" u: ", u) +
                expected_lines(" uhex: ", u, fmt=lambda v: f"0x{int(v):08x}") +
                expected_lines(" hhex: ", bits, fmt=lambda v: f"0x{int(v):04x}") +
                expected_lines(" b: ", b.astype(np.uint8)) +
                ["pid (0, 0, 0) just text"])
    assert capsys.readouterr().out.splitlines() == expected


@tessera.jit(interpret=True, debug=True)
def assert_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.device_assert(x >= 0, "x must be non-negative")  # ASSERT_LINE
    tl.store(x_ptr + offs, x * 2, mask=offs < n)


def test_device_assert_names_kernel_program_line_message_and_index():
    x = np.arange(20, dtype=np.float32)
    assert_kernel[(3,)](x, 20, BLOCK=8)  # every element passes
    np.testing.assert_array_equal(x, np.arange(20) * 2)
    x[13] = -1.0
    x[15] = -2.0
    with pytest.raises(KernelAssertionError) as info:
        assert_kernel[(3,)](x, 20, BLOCK=8)
    error = info.value
    line = line_of(assert_kernel.fn, "ASSERT_LINE")
    assert isinstance(error, KernelRuntimeError) and isinstance(error, AssertionError)
    assert error.kernel == "assert_kernel" and error.pid == (1,)
    assert error.location.startswith(f"{__file__}:{line}:")
    message = str(error)
    assert "kernel 'assert_kernel'" in message and "program (1,)" in message
    assert "x must be non-negative" in message and "(at index (5,) and 1 more)" in message
    assert x[13] == -1.0 and x[0] == 0.0 and x[1] == 4.0  # program 0 ran, program 1 stopped


@tessera.jit(interpret=True, debug=True)
def python_assert_kernel(x_ptr, n, LIMIT: tl.constexpr):
    assert LIMIT > 0, "LIMIT must be positive"  # checked at compile time
    value = tl.load(x_ptr)
    assert value < LIMIT, "value over the limit"  # PY_ASSERT
    assert n  # a non-boolean condition tests != 0


def test_python_assert_statements():
    python_assert_kernel[(1,)](np.array([3], np.int32), 1, LIMIT=4)
    with pytest.raises(KernelAssertionError, match="value over the limit") as info:
        python_assert_kernel[(1,)](np.array([5], np.int32), 1, LIMIT=4)
    assert f":{line_of(python_assert_kernel.fn, 'PY_ASSERT')}:" in info.value.location
    with pytest.raises(KernelAssertionError, match="<no message>"):
        python_assert_kernel[(1,)](np.array([3], np.int32), 0, LIMIT=4)
    with pytest.raises(CompileTimeAssertionFailure, match="LIMIT must be positive"):
        python_assert_kernel[(1,)](np.array([3], np.int32), 1, LIMIT=0)


@tessera.jit(interpret=True)
def pointer_print(x_ptr, y_ptr, step, BLOCK: tl.constexpr):
    tl.device_print("ptr ", x_ptr + tl.arange(0, BLOCK) * step)
    tl.device_print("p", y_ptr + 1, x_ptr)


def test_device_print_of_pointers_prints_their_host_addresses(capsys, rng):
    # As Triton (%p): each element's address; here the caller's real address plus the byte
    # offset, so it compares with the array's own address (past the end too).
    block = 16
    step = int(rng.integers(1, 5))
    x = np.zeros(block * step - int(rng.integers(0, step)), np.int32)  # the last ones past it
    y = np.zeros(3, np.float64)
    capsys.readouterr()  # the rng fixture's seed line
    pointer_print[(1,)](x, y, step, BLOCK=block)
    lines = capsys.readouterr().out.splitlines()
    base = x.__array_interface__["data"][0]
    assert lines[:block] == [f"pid (0, 0, 0) idx ({i:>2}) ptr: {hex(base + 4 * step * i)}"
                             for i in range(block)]
    y_base = y.__array_interface__["data"][0]
    assert lines[block:] == [f"pid (0, 0, 0) idx () p: (operand 0) {hex(y_base + 8)}",
                             f"pid (0, 0, 0) idx () p: (operand 1) {hex(base)}"]


def non_constant_prefix(x_ptr, n):
    tl.device_print(n, n)


@pytest.mark.parametrize("fn,message", [
    (non_constant_prefix, "prefix must be a constexpr string"),
])
def test_device_print_errors_name_the_line(fn, message):
    with pytest.raises(CompilationError, match=message) as info:
        frontend.build_module(fn, {"x_ptr": "*fp32", "n": "i32"} if "n" in
                              inspect.signature(fn).parameters else {"x_ptr": "*fp32"}, {})
    assert info.value.lineno == line_of(fn, "tl.device_print")


def debug_ops_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    unused = x * 3  # noqa: F841 (dead: dce removes it, not the print or the assert)
    for i in range(0, n):
        tl.device_print("i", i)
    tl.device_assert(x < 100, "big")


def test_cleanup_passes_keep_print_and_assert(capsys):
    module = frontend.build_module(debug_ops_kernel, {"x_ptr": "*i32", "n": "i32"},
                                   {"BLOCK": 4}, debug=True)
    cleaned = module.clone()
    passes.run(cleaned, ["canonicalize", "cse", "dce", "licm"])
    names = [op.name for op in cleaned.functions()[0].body(0).operations]
    assert "print" not in names and "for" in names and "assert" in names
    assert "muli" not in names
    for version in (module, cleaned):
        interpreter.run(version, (1,), [np.array([1, 2, 3, 4], np.int32), 3])
        assert capsys.readouterr().out.splitlines() == [
            f"pid (0, 0, 0) idx () i: {i}" for i in range(3)]
        with pytest.raises(KernelAssertionError, match="big"):
            interpreter.run(version, (1,), [np.array([1, 200, 3, 4], np.int32), 3])
        assert len(capsys.readouterr().out.splitlines()) == 3  # the prints before the assert


def static_print_kernel(x_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.static_print("BLOCK =", BLOCK, x)


def test_static_print_prints_once_at_compile_time(capsys):
    module = frontend.build_module(static_print_kernel, {"x_ptr": "*fp16"}, {"BLOCK": 32})
    assert capsys.readouterr().out == "BLOCK = 32 fp16[32]\n"
    interpreter.run(module, (2,), [np.zeros(32, np.float16)])
    assert capsys.readouterr().out == ""
