# The notebook experience on the GPU, in a real Jupyter kernel (ipykernel, driven by nbclient):
# the CPU notebook tests (tests/python/notebook/) run kernels in interpret mode; here the same
# story runs compiled kernels on CUDA tensors. Redefining a @jit helper, the kernel itself or a
# tl.constexpr global it reads in a later cell takes effect on the next launch (through the C++
# fast path, which is what a second launch takes), a compile error names the cell's line, and
# an autotuned kernel's perf_report draws a real plot inline.
# The GPU machine has no package registry: scripts/gpu.sh installs nbclient, nbformat and
# ipykernel from the wheels scripts/pack_core.sh carries (.carry/wheels).
import re

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)
nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (.carry/wheels)")
nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed (.carry/wheels)")
pytest.importorskip("ipykernel", reason="ipykernel is not installed (.carry/wheels)")

CELLS = [
    # In[1]: setup
    """import torch
import tessera
import tessera.language as tl
import matplotlib
%matplotlib inline
OFFSET = tl.constexpr(0.0)
torch.manual_seed(0)
x = torch.randn(1000, device="cuda")
out = torch.full_like(x, float("nan"))""",
    # In[2]: a helper and a compiled kernel
    """@tessera.jit
def helper(v):
    return v * 2

@tessera.jit
def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, helper(tl.load(x_ptr + offs, mask=mask)) + OFFSET, mask=mask)

def launch():
    out.fill_(float("nan"))
    scale[(tessera.cdiv(1000, 256),)](x, out, 1000, BLOCK=256)
    torch.cuda.synchronize()
    return out""",
    # In[3]: it runs compiled (PTX exists), twice (the second launch takes the fast path)
    """assert "ld.global" in scale.asm(x, out, 1000, BLOCK=256)["ptx"]
launch(); launch()
print("first:", torch.equal(out, x * 2))""",
    # In[4]: redefine the helper only: the unchanged kernel uses it
    """@tessera.jit
def helper(v):
    return v * 3

launch()
print("new helper:", torch.equal(out, x * 3))""",
    # In[5]: rebind the constexpr global only
    """OFFSET = tl.constexpr(100.0)
launch()
# x * 3 + 100 compiles to one fma (as in Triton); float64 then one rounding is its exact value.
print("new global:", torch.equal(out, (x.double() * 3 + 100).float()))""",
    # In[6]: redefine the kernel itself
    """@tessera.jit
def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) - 1 + OFFSET, mask=mask)

launch()
print("new kernel:", torch.equal(out, x - 1 + 100))""",
    # In[7]: a compile error names this cell's line
    """@tessera.jit
def mismatched(x_ptr, BLOCK: tl.constexpr):
    a = tl.zeros((32, 16), tl.float32)
    b = tl.zeros((32, 32), tl.float32)
    c = tl.dot(a, b)
    tl.store(x_ptr + tl.arange(0, 32), tl.sum(c, 1))

mismatched[(1,)](out, BLOCK=32)""",
    # In[8]: an autotuned kernel timed on the GPU, plotted inline
    """from tessera.testing import Benchmark, do_bench, perf_report

# add_one writes its input: restore_value puts x back after each timed config (as Triton's).
@tessera.autotune(configs=[tessera.Config({"BLOCK": 256}), tessera.Config({"BLOCK": 1024})],
                  key=["n"], restore_value=["x_ptr"])
@tessera.jit
def add_one(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

@perf_report(Benchmark(x_names=["n"], x_vals=[2**16, 2**20], line_arg="p", line_vals=["tessera"],
                       line_names=["Tessera"], plot_name="add_one", ylabel="ms"))
def bench(n, p):
    y = torch.zeros(n, device="cuda")
    grid = lambda meta: (tessera.cdiv(n, meta["BLOCK"]),)
    return do_bench(lambda: add_one[grid](y, n))

bench.run(show_plots=True, print_data=False)
y = torch.zeros(5000, device="cuda")
add_one[lambda meta: (tessera.cdiv(5000, meta["BLOCK"]),)](y, 5000)
print("tuned:", add_one.best_config is not None, "sum:", y.sum().item())""",
]

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _stream(cell) -> str:
    return "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")


def test_compiled_kernels_redefinitions_errors_and_plots_in_jupyter(tmp_path):
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(source) for source in CELLS])
    client = nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                                     allow_errors=True,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    cells = notebook.cells
    errors = {i: o for i, cell in enumerate(cells) for o in cell.outputs
              if o.output_type == "error"}
    assert set(errors) == {6}, {i: ANSI.sub("", "\n".join(e.traceback)) for i, e in errors.items()}
    assert _stream(cells[2]) == "first: True\n"
    assert _stream(cells[3]) == "new helper: True\n"
    assert _stream(cells[4]) == "new global: True\n"
    assert _stream(cells[5]) == "new kernel: True\n"
    text = ANSI.sub("", "\n".join(errors[6].traceback))
    assert errors[6].ename == "CompilationError"
    assert "mismatched: Cell In[7], line 5" in text, text
    assert _stream(cells[7]) == "tuned: True sum: 5000.0\n"
    assert any("image/png" in o.get("data", {}) for o in cells[7].outputs)
