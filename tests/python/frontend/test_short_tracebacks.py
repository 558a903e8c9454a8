# Kernel errors leave the public entry points (a launch, compile) with Tessera's internal frames
# dropped and the chained "direct cause" left out of the display (it stays on the error, as
# Triton's): the traceback is the caller's line, one line of the boundary and the message, which
# ends with the kernel's source line and a caret.
import os
import subprocess
import sys
import textwrap

import pytest

from tessera.testing.environment import package_root

COMPILE_ERROR = """
import numpy as np, tessera, tessera.language as tl

@tessera.jit(interpret=True)
def mismatched(x_ptr, BLOCK: tl.constexpr):
    a = tl.zeros((32, 16), tl.float32)
    b = tl.zeros((32, 32), tl.float32)
    c = tl.dot(a, b)
    tl.store(x_ptr + tl.arange(0, 32), tl.sum(c, 1))

mismatched[(1,)](np.zeros(32, np.float32), BLOCK=32)
"""

FAULT = """
import numpy as np, tessera, tessera.language as tl

@tessera.jit(interpret=True)
def overrun(x_ptr):
    tl.store(x_ptr + tl.arange(0, 16), 1.0)

overrun[(1,)](np.zeros(10, np.float32))
"""


def _traceback(tmp_path, source: str, **env: str) -> list:
    script = tmp_path / "kernel_script.py"
    script.write_text(textwrap.dedent(source))
    root = package_root()
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [p for p in (root, os.environ.get("PYTHONPATH")) if p]), **env}
    if "TESSERA_FULL_TRACEBACK" not in env:
        environ.pop("TESSERA_FULL_TRACEBACK", None)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=environ, timeout=120)
    assert done.returncode != 0
    return done.stderr.rstrip("\n").splitlines()


def test_a_compile_error_traceback_is_short_and_ends_at_the_kernel_line(tmp_path):
    lines = _traceback(tmp_path, COMPILE_ERROR)
    text = "\n".join(lines)
    assert len(lines) <= 25, text
    assert "direct cause" not in text
    assert "ast_to_ir.py" not in text and "language" + os.sep not in text
    assert f'{tmp_path / "kernel_script.py"}", line 11' in text  # the launching line
    assert "tessera.errors.CompilationError: mismatched: " in text
    assert "kernel_script.py:8:9: " in text
    assert lines[-2] == "    c = tl.dot(a, b)" and lines[-1] == "        ^"


def test_the_full_traceback_knob_keeps_the_internal_frames(tmp_path):
    text = "\n".join(_traceback(tmp_path, COMPILE_ERROR, TESSERA_FULL_TRACEBACK="1"))
    assert "ast_to_ir.py" in text and "direct cause" in text


def test_an_interpreter_fault_shows_the_kernel_source_line(tmp_path):
    lines = _traceback(tmp_path, FAULT)
    text = "\n".join(lines)
    assert len(lines) <= 12, text
    assert "KernelRuntimeError: kernel 'overrun', program (0,), at " in text
    assert "kernel_script.py:6:5 (store)" in text
    assert lines[-2] == "    tl.store(x_ptr + tl.arange(0, 16), 1.0)" and lines[-1] == "    ^"


def test_errors_caught_in_python_keep_their_attributes():
    import numpy as np
    import tessera
    import tessera.language as tl

    @tessera.jit(interpret=True)
    def bad(x_ptr):
        tl.store(x_ptr + tl.arange(0, 8), tl.zeros((4,), tl.float32) + tl.zeros((8,), tl.float32))

    with pytest.raises(tessera.CompilationError) as caught:
        bad[(1,)](np.zeros(8, np.float32))
    error = caught.value
    assert error.kernel_name == "bad" and error.filename == __file__
    assert error.__suppress_context__
    # The underlying error stays chained, as Triton's CompilationError chains it.
    assert isinstance(error.__cause__, ValueError)
    assert str(error.__cause__) in str(error)


CAUGHT_AND_REPORTED = """
import sys, traceback
import numpy as np, tessera, tessera.language as tl

@tessera.jit(interpret=True)
def bad_axis(x_ptr):
    tl.store(x_ptr, tl.program_id(7))

try:
    bad_axis[(1,)](np.zeros(1, np.int32))
except tessera.CompilationError as error:
    print("CAUSE", type(error.__cause__).__name__, error.__cause__, file=sys.stderr)
    caught = error
raise caught
"""


def test_the_cause_is_kept_for_code_but_left_out_of_the_uncaught_display(tmp_path):
    lines = _traceback(tmp_path, CAUGHT_AND_REPORTED)
    text = "\n".join(lines)
    assert lines[0] == "CAUSE ValueError program_id axis must be 0, 1, or 2 but got 7", text
    assert "direct cause" not in text and "semantic.py" not in text, text
    assert "tessera.errors.CompilationError: bad_axis: " in text
    # the full-traceback knob shows the chain
    text = "\n".join(_traceback(tmp_path, CAUGHT_AND_REPORTED, TESSERA_FULL_TRACEBACK="1"))
    assert "direct cause" in text and "ValueError: program_id axis must be 0, 1, or 2" in text


def test_the_chained_cause_reads_as_tritons():
    # As Triton's CompilationError: __cause__ is the error of the language's rule, in Triton's
    # words where Triton's own tests compare them; a failed static_assert chains nothing.
    import tessera
    import tessera.language as tl
    from tessera.errors import CompilationError, CompileTimeAssertionFailure

    @tessera.jit(interpret=True)
    def bad_range():
        tl.arange(2, 7)

    @tessera.jit(interpret=True)
    def bad_shape():
        tl.full((33,), 0, dtype=tl.int64)

    @tessera.jit(interpret=True)
    def failed_assert():
        tl.static_assert(1 == 2)

    for kernel, text in ((bad_range, "arange's range must be a power of 2"),
                         (bad_shape, "Shape element 0 must be a power of 2")):
        with pytest.raises(CompilationError) as caught:
            kernel[(1,)]()
        assert isinstance(caught.value.__cause__, ValueError)
        assert str(caught.value.__cause__) == text
    with pytest.raises(CompileTimeAssertionFailure) as caught:
        failed_assert[(1,)]()
    assert caught.value.__cause__ is None


def test_a_compile_error_in_the_interpreter_is_also_an_interpreter_error():
    # As Triton's interpreter, which raises InterpreterError for every error of a kernel it
    # runs: the error is both classes, keeps its name, attributes and chained cause.
    import numpy as np
    import tessera
    import tessera.language as tl

    @tessera.jit(interpret=True)
    def bad_axis(x_ptr):
        tl.store(x_ptr, tl.program_id(5))

    for _ in range(2):
        with pytest.raises(tessera.InterpreterError) as caught:
            bad_axis[(1,)](np.zeros(1, np.int32))
        error = caught.value
        assert isinstance(error, tessera.CompilationError)
        assert type(error).__name__ == "CompilationError" and error.kernel_name == "bad_axis"
        assert str(error.__cause__) == "program_id axis must be 0, 1, or 2 but got 5"
        assert str(error).startswith("bad_axis: ")
    # compiled for a GPU (no interpreter), it is a CompilationError only
    with pytest.raises(tessera.CompilationError) as caught:
        bad_axis.compile(np.zeros(1, np.int32), arch="sm_80")
    assert not isinstance(caught.value, tessera.InterpreterError)
