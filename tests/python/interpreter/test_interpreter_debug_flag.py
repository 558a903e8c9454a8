"""Debug mode, with Triton's semantics: tl.device_assert and `assert` statements build code
only when debug is on (``@jit(debug=True)`` or the TESSERA_DEBUG knob, as TRITON_DEBUG);
otherwise their arguments are checked and nothing is built (no assert op, no __assertfail in
the PTX, no failure). ``mask=`` limits the check to its true lanes. tl.static_assert and
tl.static_print work in any mode, with Triton's messages and arguments."""
import io
import re

import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.errors import CompilationError, CompileTimeAssertionFailure
from tessera.interpreter import KernelAssertionError


def kernel_source(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=-1.0)
    tl.device_assert(x >= 0, "x must be non-negative", mask=offs < n)
    assert tl.sum(x, axis=0) < 1000, "sum too large"
    tl.store(x_ptr + offs, x + 1, mask=offs < n)


def ptx_strings(ptx: str):
    """The text of every .b8 string constant of the PTX."""
    return [bytes(int(b) for b in body.split(",")).rstrip(b"\0").decode()
            for body in re.findall(r"\.b8 \w+\[\d+\] = \{([\d, ]+)\};", ptx)]


def test_asserts_build_nothing_unless_debug():
    plain = tessera.jit(kernel_source, interpret=True)
    x = np.array([1, -2, 3, 4000], np.float32)
    with tessera.config.knobs.scope(debug=False):
        plain[(1,)](x, 4, BLOCK=4)  # both asserts would fail: they are not there
        np.testing.assert_array_equal(x, [2, -1, 4, 4001])
        stages = plain.asm(x, 4, BLOCK=4, arch="sm_90a")
        assert " assert " not in stages["tir"] and "__assertfail" not in stages["ptx"]
        with tessera.config.knobs.scope(debug=True):  # the knob: a module of its own
            with pytest.raises(KernelAssertionError, match="x must be non-negative"):
                plain[(1,)](x, 4, BLOCK=4)
        plain[(1,)](x, 4, BLOCK=4)  # off again: the module without asserts
        np.testing.assert_array_equal(x, [3, 0, 5, 4002])


def test_jit_debug_flag_and_messages():
    debug = tessera.jit(kernel_source, interpret=True, debug=True)
    x = np.array([1, 2, 3, -5], np.float32)
    debug[(1,)](x, 3, BLOCK=4)  # the negative lane is masked off: no failure
    np.testing.assert_array_equal(x, [2, 3, 4, -5])
    with pytest.raises(KernelAssertionError, match="x must be non-negative") as info:
        debug[(1,)](x, 4, BLOCK=4)
    assert "(at index (3,))" in str(info.value)
    with pytest.raises(KernelAssertionError, match="sum too large"):
        debug[(1,)](np.full(4, 600, np.float32), 4, BLOCK=4)
    ptx = debug.asm(x, 4, BLOCK=4, arch="sm_90a")["ptx"]
    assert "__assertfail" in ptx
    texts = ptx_strings(ptx)
    assert "x must be non-negative" in texts and "sum too large" in texts


def test_compile_time_assert_statements_follow_debug_mode():
    def limit_check(x_ptr, LIMIT: tl.constexpr):
        assert LIMIT > 0, "LIMIT must be positive"
        tl.store(x_ptr, 1.0)

    x = np.zeros(1, np.float32)
    tessera.jit(limit_check, interpret=True)[(1,)](x, LIMIT=0)  # as Triton: nothing built
    assert x[0] == 1.0
    with pytest.raises(CompileTimeAssertionFailure, match="LIMIT must be positive"):
        tessera.jit(limit_check, interpret=True, debug=True)[(1,)](x, LIMIT=0)


def test_assert_arguments_are_checked_without_debug():
    @tessera.jit(interpret=True)
    def bad_message(x_ptr):
        tl.device_assert(tl.load(x_ptr) > 0, 3)

    with pytest.raises(CompilationError, match="message must be a constexpr string"):
        bad_message[(1,)](np.ones(1, np.float32))


def test_static_assert_and_static_print_in_any_mode(capsys):
    @tessera.jit(interpret=True)
    def static_checks(x_ptr, BLOCK: tl.constexpr):
        tl.static_print("BLOCK", BLOCK, sep="=", end=";\n", flush=True)
        tl.static_assert(BLOCK % 4 == 0, "BLOCK must be a multiple of 4")
        tl.store(x_ptr + tl.arange(0, BLOCK), 1.0)

    static_checks[(1,)](np.zeros(8, np.float32), BLOCK=8)
    assert capsys.readouterr().out == "BLOCK=8;\n"  # once, at compile time
    static_checks[(2,)](np.zeros(8, np.float32), BLOCK=8)
    assert capsys.readouterr().out == ""
    with pytest.raises(CompileTimeAssertionFailure, match="BLOCK must be a multiple of 4"):
        static_checks[(1,)](np.zeros(8, np.float32), BLOCK=2)

    @tessera.jit(interpret=True)
    def runtime_condition(x_ptr, n):
        tl.static_assert(n > 0)

    with pytest.raises(CompilationError, match="could not be determined at compile-time"):
        runtime_condition[(1,)](np.zeros(1, np.float32), 3)

    @tessera.jit(interpret=True)
    def not_a_bool(x_ptr, N: tl.constexpr):
        tl.static_assert(N, "N")

    with pytest.raises(CompilationError, match="must be a compile-time bool, got 3"):
        not_a_bool[(1,)](np.zeros(1, np.float32), N=3)


def test_static_print_to_a_file():
    out = io.StringIO()

    @tessera.jit(interpret=True)
    def to_file(x_ptr, STREAM: tl.constexpr):
        tl.static_print("x is", tl.load(x_ptr), file=STREAM)

    to_file[(1,)](np.zeros(1, np.float32), STREAM=out)
    assert out.getvalue() == "x is fp32[]\n"
