"""Compilation errors: each kind names the kernel and points at file:line:col with a caret.

Expected positions are found by searching this file's text for the offending snippet, so they
do not depend on the front end's own position arithmetic.
"""
import pytest

import tessera.language as tl
from tessera import _tessera
from tessera.errors import (CompilationError, CompileTimeAssertionFailure,
                            UnsupportedLanguageConstruct)
from tessera.frontend import build_module


class StubJIT:
    __tessera_jit__ = True

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = fn.__name__


def jit(fn):
    return StubJIT(fn)


SOURCE = open(__file__).read().splitlines()


def position(snippet, within=None):
    """1-based (line, col) of the first occurrence of `snippet` (after the line holding
    `within`, when given)."""
    start = 0 if within is None else next(i for i, l in enumerate(SOURCE) if within in l)
    for index in range(start, len(SOURCE)):
        if snippet in SOURCE[index]:
            return index + 1, SOURCE[index].index(snippet) + 1
    raise AssertionError(f"{snippet!r} not found")


def compile_error(kernel, signature=None, constexprs=None, cls=CompilationError, **kwargs):
    with pytest.raises(cls) as info:
        build_module(kernel, {"x_ptr": "*fp32", "n": "i32"} if signature is None else signature,
                     constexprs or {}, **kwargs)
    return info.value


def check(error, kernel_name, snippet, message, within=None):
    line, col = position(snippet, within)
    text = str(error).splitlines()
    assert text[0].startswith(f"{kernel_name}: {__file__}:{line}:{col}: "), text[0]
    assert message in text[0]
    assert text[1] == SOURCE[line - 1]
    assert text[2] == " " * (col - 1) + "^"
    assert (error.kernel_name, error.filename, error.lineno, error.col) == \
        (kernel_name, __file__, line, col)


def pointer_plus_float(x_ptr, n):
    y = x_ptr + 1.5  # E_PTR_FLOAT


def test_type_error():
    error = compile_error(pointer_plus_float)
    check(error, "pointer_plus_float", "x_ptr + 1.5  # E_PTR_FLOAT",
          "invalid operands of type pointer<fp32> and fp32")


def shape_mismatch(x_ptr, n):
    a = tl.arange(0, 16)
    b = tl.arange(0, 32)
    c = a + b  # E_SHAPE


def test_shape_mismatch():
    check(compile_error(shape_mismatch), "shape_mismatch", "a + b  # E_SHAPE",
          "incompatible dimensions at index 0: 16 and 32")


def runtime_arange(x_ptr, n):
    offs = tl.arange(0, n)  # E_ARANGE


def power_of_two_arange(x_ptr, n):
    offs = tl.arange(0, 24)  # E_POW2


def test_non_constexpr_and_non_power_of_two_arange():
    check(compile_error(runtime_arange), "runtime_arange", "tl.arange(0, n)  # E_ARANGE",
          "arange's start and end must be constexpr ints")
    check(compile_error(power_of_two_arange), "power_of_two_arange",
          "tl.arange(0, 24)  # E_POW2", "must be a power of 2")


def uses_break(x_ptr, n):
    for i in range(n):
        break  # E_BREAK


def uses_continue(x_ptr, n):
    while n > 0:
        continue  # E_CONTINUE


def returns_value(x_ptr, n):
    return n  # E_RETURN


def chained_compare(x_ptr, n):
    c = 0 < n < 10  # E_CHAIN


def with_statement(x_ptr, n):
    with open("f"):  # E_WITH
        pass


@pytest.mark.parametrize("kernel,snippet,message", [
    (uses_break, "break  # E_BREAK", "break is not supported"),
    (uses_continue, "continue  # E_CONTINUE", "continue is not supported"),
    (returns_value, "return n  # E_RETURN", "a kernel cannot return a value"),
    (chained_compare, "0 < n < 10  # E_CHAIN", "chained comparisons of runtime values"),
    (with_statement, "with open", "unsupported syntax: With"),
])
def test_unsupported_syntax(kernel, snippet, message):
    error = compile_error(kernel, cls=UnsupportedLanguageConstruct)
    check(error, kernel.__name__, snippet, message)


def undefined_name(x_ptr, n):
    y = n + not_defined_anywhere  # E_UNDEFINED


def one_branch_only(x_ptr, n):
    if n > 0:
        y = n * 2
    tl.store(x_ptr, y)  # E_ONE_BRANCH


def loop_local(x_ptr, n):
    for i in range(n):
        t = i
    tl.store(x_ptr, t)  # E_LOOP_LOCAL


def test_undefined_names():
    check(compile_error(undefined_name), "undefined_name", "not_defined_anywhere  # E_UNDEF",
          "name 'not_defined_anywhere' is not defined")
    error = compile_error(one_branch_only)
    check(error, "one_branch_only", "y)  # E_ONE_BRANCH", "'y' is not defined on every path")
    assert "then branch of the if at line" in error.message
    check(compile_error(loop_local), "loop_local", "t)  # E_LOOP_LOCAL",
          "assigned only inside the loop")


NOT_CONSTEXPR_GLOBAL = 128
CONSTEXPR_GLOBAL = tl.constexpr(128)


def reads_globals(x_ptr, n):
    ok = tl.arange(0, CONSTEXPR_GLOBAL)
    bad = tl.arange(0, NOT_CONSTEXPR_GLOBAL)  # E_GLOBAL


def test_only_constexpr_globals_can_be_read():
    check(compile_error(reads_globals), "reads_globals", "NOT_CONSTEXPR_GLOBAL)  # E_GLOBAL",
          "cannot read the global variable 'NOT_CONSTEXPR_GLOBAL'")


def test_a_captured_variable_is_not_defined_in_the_kernel():
    # As Triton ("X is not defined"): a variable of the enclosing function that is not a
    # compile-time constant; constexpr-wrapped ones are read.
    CAPTURED = 42
    CAPTURED_CONSTEXPR = tl.constexpr(64)

    def reads_captured(x_ptr, n):
        ok = tl.arange(0, CAPTURED_CONSTEXPR)
        bad = CAPTURED + n  # E_CAPTURED

    check(compile_error(reads_captured), "reads_captured", "CAPTURED + n  # E_CAPTURED",
          "CAPTURED is not defined in the kernel: it is a variable of the enclosing function")


def calls_python_function(x_ptr, n):
    y = sorted([n])  # E_PY_CALL


def test_calling_a_plain_python_function():
    check(compile_error(calls_python_function, cls=UnsupportedLanguageConstruct),
          "calls_python_function", "sorted([n])  # E_PY_CALL", "cannot call 'sorted'")


@jit
def two_args(a, b):
    return a + b


@jit
def bad_callee(x, BLOCK: tl.constexpr):
    return x + tl.arange(0, BLOCK)  # E_IN_CALLEE


def too_many_args(x_ptr, n):
    z = two_args(n, n, n)  # E_TOO_MANY


def missing_arg(x_ptr, n):
    z = two_args(n)  # E_MISSING


def runtime_for_constexpr(x_ptr, n):
    z = bad_callee(n, n)  # E_CONSTEXPR_ARG


def error_inside_callee(x_ptr, n):
    z = bad_callee(n, 6)  # E_CALL_SITE


def test_jit_call_errors():
    check(compile_error(too_many_args), "too_many_args", "two_args(n, n, n)  # E_TOO_MANY",
          "two_args(): too many positional arguments")
    check(compile_error(missing_arg), "missing_arg", "two_args(n)  # E_MISSING",
          "two_args(): missing a required argument: 'b'")
    # As Triton, a helper's constexpr annotation is not checked: the runtime value reaches
    # the callee, whose arange then fails there (the call site in a note).
    error = compile_error(runtime_for_constexpr)
    check(error, "runtime_for_constexpr", "tl.arange(0, BLOCK)  # E_IN_CALLEE",
          "arange's start and end must be constexpr ints")
    assert "bad_callee(n, n)" in str(error) or "E_CONSTEXPR_ARG" in str(error) or \
        "inlined at" in str(error)
    # An error inside a callee points into the callee and notes the call site.
    error = compile_error(error_inside_callee)
    check(error, "error_inside_callee", "tl.arange(0, BLOCK)  # E_IN_CALLEE",
          "arange's range must be a power of 2")
    call_line, call_col = position("bad_callee(n, 6)  # E_CALL_SITE")
    assert error.notes == [f"  in bad_callee(), inlined at {__file__}:{call_line}:{call_col}"]


def changes_loop_type(x_ptr, n):
    acc = 0
    for i in range(n):  # E_CARRIED
        acc = acc + 0.5


def changes_branch_type(x_ptr, n):
    v = n
    if n > 0:  # E_BRANCH_TYPE
        v = 1.5


def reassigns_constexpr_in_loop(x_ptr, n, BLOCK: tl.constexpr):
    for i in range(n):  # E_CONSTEXPR_LOOP
        BLOCK = 3


def test_control_flow_type_errors():
    check(compile_error(changes_loop_type), "changes_loop_type", "for i in range(n):  # E_CAR",
          "loop-carried variable 'acc' is a int32[] before the loop but a fp32[]")
    check(compile_error(changes_branch_type), "changes_branch_type", "if n > 0:  # E_BRANCH",
          "'v' is a int32[] before the if, but the then branch assigns a fp32[]")
    check(compile_error(reassigns_constexpr_in_loop, constexprs={"BLOCK": 4}),
          "reassigns_constexpr_in_loop", "for i in range(n):  # E_CONSTEXPR_LOOP",
          "'BLOCK' holds the compile-time value 4; it cannot be reassigned inside a runtime loop")


def static_assert_kernel(x_ptr, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK % 16 == 0, "BLOCK must be a multiple of 16")  # E_STATIC


def test_static_assert():
    build_module(static_assert_kernel, {"x_ptr": "*fp32", "n": "i32"}, {"BLOCK": 32})
    error = compile_error(static_assert_kernel, constexprs={"BLOCK": 24},
                          cls=CompileTimeAssertionFailure)
    check(error, "static_assert_kernel", "tl.static_assert(BLOCK % 16", "static_assert failed: "
          "BLOCK must be a multiple of 16")


def signature_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass


def test_signature_errors_point_at_the_parameter():
    header = "def signature_kernel"
    error = compile_error(signature_kernel, {"x_ptr": "*fp32"}, {"BLOCK": 4})
    check(error, "signature_kernel", "n, BLOCK", "parameter 'n' has no type in the signature",
          within=header)
    error = compile_error(signature_kernel, {"x_ptr": "*fp32", "n": "i32"}, {})
    check(error, "signature_kernel", "BLOCK: tl", "parameter 'BLOCK' has no constexpr value",
          within=header)
    error = compile_error(signature_kernel, {"x_ptr": "*fp77", "n": "i32"}, {"BLOCK": 4})
    check(error, "signature_kernel", "x_ptr, n", "unknown type 'fp77'", within=header)


def test_verifier_errors_become_compilation_errors(monkeypatch):
    from tessera.language.semantic import Semantic

    original = Semantic.create

    def broken_create(self, name, operands, element, shape, **attrs):
        if name == "addf":  # build an addf whose result type disagrees with its operands
            return original(self, name, operands, tl.float16, shape, **attrs)
        return original(self, name, operands, element, shape, **attrs)

    monkeypatch.setattr(Semantic, "create", broken_create)

    def verifier_kernel(x_ptr, n):
        x = tl.load(x_ptr)
        tl.store(x_ptr, (x + x).to(tl.float32))  # E_VERIFIER

    error = compile_error(verifier_kernel)
    check(error, "verifier_kernel", "x + x).to", "'addf': operands and result must have one type")
    assert isinstance(error.__cause__, _tessera.ir.CompileError)
