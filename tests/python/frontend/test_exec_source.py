"""Kernels whose definition ran from a string (exec): the decorator finds the text on the
stack, checked against the function's code, so they compile like kernels in files."""
import textwrap

import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.frontend.source import function_source_text

TEMPLATE = textwrap.dedent('''
    @tessera.jit
    def kernel(X, Z, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(X + offs, mask=mask)
        tl.store(Z + offs, EXPR, mask=mask)
''')


def make_kernel(expr: str):
    """As Triton's tests do: patch the template text, exec it, return the new kernel."""
    src = TEMPLATE.replace("EXPR", expr)
    namespace = {}
    exec(src, globals(), namespace)
    return namespace["kernel"]


def _helper_exec(text):  # exec called one level further down the stack
    namespace = {}
    exec(text, globals(), namespace)
    return namespace


@pytest.mark.parametrize("expr, reference", [
    ("x * 3.0 + 1.0", lambda x: x * 3 + 1),
    ("tl.where(x > 0, x, -x)", np.abs),
    ("tl.exp(x) - 1.0", lambda x: np.exp(x) - 1),
])
def test_exec_defined_kernel_runs(expr, reference):
    kernel = make_kernel(expr)
    rng = np.random.default_rng()
    n = int(rng.integers(100, 300))  # not a multiple of the block
    x = rng.standard_normal(n).astype(np.float32)
    z = np.zeros(n, np.float32)
    _launch(kernel, x, z, n)
    np.testing.assert_allclose(z, reference(x.astype(np.float64)), rtol=1e-5, atol=1e-6)


def _launch(kernel, x, z, n):
    with tessera.config.knobs.scope(interpret=True):
        kernel[(tessera.cdiv(n, 64),)](x, z, n, BLOCK=64)


def test_two_kernels_from_one_template_keep_their_own_text():
    double = make_kernel("x * 2.0")
    negate = make_kernel("-x")
    assert "x * 2.0" in function_source_text(double.fn)
    text = function_source_text(negate.fn)
    assert "-x" in text and "x * 2.0" not in text
    x = np.linspace(-3, 3, 50, dtype=np.float32)
    z1, z2 = np.zeros_like(x), np.zeros_like(x)
    _launch(double, x, z1, 50)
    _launch(negate, x, z2, 50)
    np.testing.assert_array_equal(z1, x * 2)
    np.testing.assert_array_equal(z2, -x)


def test_text_found_through_a_helper_frame():
    src = TEMPLATE.replace("EXPR", "x + 5.0")
    kernel = _helper_exec(src)["kernel"]
    x = np.arange(10, dtype=np.float32)
    z = np.zeros_like(x)
    _launch(kernel, x, z, 10)
    np.testing.assert_array_equal(z, x + 5)


def test_a_string_that_is_not_the_definition_is_not_taken():
    # The local `decoy` defines a kernel of the same name with a different body; only the text
    # that compiles to this very function may be used, and here that text is gone.
    decoy = TEMPLATE.replace("EXPR", "x * 100.0")  # noqa: F841
    code = compile(TEMPLATE.replace("EXPR", "x - 1.0"), "<string>", "exec")
    namespace = {}
    exec(code, globals(), namespace)
    kernel = namespace["kernel"]
    with pytest.raises(OSError, match="cannot read the source"):
        function_source_text(kernel.fn)


def test_functions_in_files_are_unaffected():
    @tessera.jit
    def in_file(X, N: tl.constexpr):
        tl.store(X + tl.arange(0, N), tl.arange(0, N))

    assert function_source_text(in_file.fn).startswith("def in_file(")
