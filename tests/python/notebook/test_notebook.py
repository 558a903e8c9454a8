# In a real Jupyter kernel (ipykernel, driven by nbclient): a kernel defined in a cell runs in
# interpret mode; redefining it, or a @jit helper it calls, or a tl.constexpr global it reads,
# in a later cell takes effect on the next launch. Kernels defined in cells have readable source
# (IPython registers each cell's text in linecache), and errors point into the cell.
import pytest

nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (make setup)")
nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed (make setup)")
pytest.importorskip("ipykernel", reason="ipykernel is not installed (make setup)")
from tessera.testing.environment import package_root  # noqa: E402

PATHS = [root] if (root := package_root()) else []

CELLS = [
    # 0: setup
    f"""import sys
sys.path[:0] = {PATHS!r}  # where this process found tessera, if not installed
import inspect
import numpy as np
import tessera
import tessera.language as tl
OFFSET = tl.constexpr(0)
x = np.arange(10, dtype=np.float32)
out = np.zeros_like(x)""",
    # 1: a helper and a kernel
    """@tessera.jit
def helper(v):
    return v * 2

@tessera.jit(interpret=True)
def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, helper(tl.load(x_ptr + offs, mask=mask)) + OFFSET, mask=mask)""",
    # 2: run it; its source is readable
    """assert "helper(tl.load(x_ptr" in inspect.getsource(scale.fn)
scale[(2,)](x, out, 10, BLOCK=8)
np.testing.assert_array_equal(out, x * 2)
print("first:", out.tolist())""",
    # 3: redefine the helper only
    """@tessera.jit
def helper(v):
    return v * 3""",
    # 4: the unchanged kernel uses the new helper
    """scale[(2,)](x, out, 10, BLOCK=8)
np.testing.assert_array_equal(out, x * 3)
print("new helper:", out.tolist())""",
    # 5: redefine the kernel itself, and the constexpr global
    """OFFSET = tl.constexpr(100)

@tessera.jit(interpret=True)
def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) - 1 + OFFSET, mask=mask)""",
    # 6: the new version runs
    """scale[(2,)](x, out, 10, BLOCK=8)
np.testing.assert_array_equal(out, x + 99)
print("new kernel:", out.tolist())""",
    # 7: a fault names the kernel and the cell's line
    """@tessera.jit(interpret=True)
def overrun(x_ptr):
    tl.store(x_ptr + tl.arange(0, 16), 1.0)

try:
    overrun[(1,)](x)
except tessera.interpreter.KernelRuntimeError as error:
    assert error.kernel == "overrun"
    print("fault line:", error.location.split(":")[-2])""",
]


def test_redefinitions_in_a_jupyter_kernel_take_effect(tmp_path):
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(source) for source in CELLS])
    client = nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError, with the cell's traceback, if a cell fails
    printed = ["".join(output.get("text", "") for output in cell.outputs)
               for cell in notebook.cells]
    assert printed[2] == f"first: {[float(2 * i) for i in range(10)]}\n"
    assert printed[4] == f"new helper: {[float(3 * i) for i in range(10)]}\n"
    assert printed[6] == f"new kernel: {[float(i + 99) for i in range(10)]}\n"
    assert printed[7] == "fault line: 3\n"
