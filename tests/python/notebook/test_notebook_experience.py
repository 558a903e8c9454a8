# In a real Jupyter kernel (ipykernel, driven by nbclient), what a kernel author sees: a compile
# error names the cell ("Cell In[N], line L"), shows the kernel's line with a caret and fits on
# a screen; an interpreter fault shows its source line; perf_report's saved plot leaves the
# inline backend alone; autotune in the interpreter says it uses the first config untimed.
import re

import pytest

nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (make setup)")
nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed (make setup)")
pytest.importorskip("ipykernel", reason="ipykernel is not installed (make setup)")
from tessera.testing.environment import package_root  # noqa: E402

PATHS = [root] if (root := package_root()) else []

CELLS = [
    # In[1]: setup
    f"""import sys
sys.path[:0] = {PATHS!r}
import numpy as np
import tessera
import tessera.language as tl
try:
    import matplotlib
    %matplotlib inline
except ImportError:
    matplotlib = None""",
    # In[2]: a compile error in a kernel defined in this cell
    """@tessera.jit(interpret=True)
def mismatched(x_ptr, BLOCK: tl.constexpr):
    a = tl.zeros((32, 16), tl.float32)
    b = tl.zeros((32, 32), tl.float32)
    c = tl.dot(a, b)
    tl.store(x_ptr + tl.arange(0, 32), tl.sum(c, 1))

mismatched[(1,)](np.zeros(32, np.float32), BLOCK=32)""",
    # In[3]: an interpreter fault
    """@tessera.jit(interpret=True)
def overrun(x_ptr):
    tl.store(x_ptr + tl.arange(0, 16), 1.0)

overrun[(1,)](np.zeros(10, np.float32))""",
    # In[4]: perf_report saves a plot; the backend stays inline and a later plot shows
    """from tessera.testing import Benchmark, perf_report
import tempfile
if matplotlib is not None:
    before = matplotlib.get_backend()
    bench = Benchmark(x_names=["n"], x_vals=[1, 2], line_arg="p", line_vals=[1],
                      line_names=["one"], plot_name="demo")
    perf_report(bench)(lambda n, p: float(n * p)).run(save_path=tempfile.mkdtemp())
    print("backend kept:", matplotlib.get_backend() == before)
    import matplotlib.pyplot as plt
    plt.plot([1, 2, 3])
    plt.show()""",
    # In[5]: autotune in the interpreter
    """@tessera.autotune(configs=[tessera.Config({"BLOCK": 64}), tessera.Config({"BLOCK": 128})],
                  key=["n"])
@tessera.jit(interpret=True)
def add_one(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

x = np.zeros(100, np.float32)
add_one[lambda meta: (tessera.cdiv(100, meta["BLOCK"]),)](x, 100)
print("sum:", x.sum())""",
]

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _error(cell) -> tuple:
    (error,) = [o for o in cell.outputs if o.output_type == "error"]
    text = ANSI.sub("", "\n".join(error.traceback))
    return error.ename, text


def _stream(cell, name: str) -> str:
    return "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == name)


def test_errors_plots_and_autotune_read_well_in_jupyter(tmp_path):
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(source) for source in CELLS])
    client = nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3",
                                     allow_errors=True,
                                     resources={"metadata": {"path": str(tmp_path)}})
    try:
        client.execute()
    except Exception as error:  # noqa: BLE001 - no kernel spec, a kernel that dies at start
        if not any(cell.get("outputs") for cell in notebook.cells):
            pytest.skip(f"no Jupyter kernel could start here: {error!r}")
        raise
    cells = notebook.cells

    name, text = _error(cells[1])
    lines = text.splitlines()
    assert name == "CompilationError"
    assert len(lines) <= 25, text
    assert "direct cause" not in text and "ast_to_ir" not in text
    assert "/tessera/" not in text  # no frame of the package, the boundary included
    assert "mismatched: Cell In[2], line 5, col 9: " in text
    assert "Cell In[2], line 8" in text  # the launching line, as IPython names it
    assert lines[-2:] == ["    c = tl.dot(a, b)", "        ^"]

    name, text = _error(cells[2])
    assert name == "KernelRuntimeError" and len(text.splitlines()) <= 25, text
    assert "tracebacks.py" not in text and "evaluator.py" not in text
    assert "at Cell In[3], line 3, col 5 (store): " in text
    assert text.splitlines()[-2:] == ["    tl.store(x_ptr + tl.arange(0, 16), 1.0)", "    ^"]

    if "backend kept" in _stream(cells[3], "stdout"):
        assert _stream(cells[3], "stdout") == "backend kept: True\n"
        assert any("image/png" in o.get("data", {}) for o in cells[3].outputs)

    assert _stream(cells[4], "stdout") == "sum: 100.0\n"
    assert _stream(cells[4], "stderr") == (
        "autotune add_one: interpreted on the CPU, so the 2 configs are not timed; using the "
        "first (BLOCK: 64, num_warps: 4, num_stages: 3)\n")
