"""The compatibility suite (tests/compat/kernels: kernels written as public Triton code is
written, only the imports changed) through the interpreter on CPU tensors, each against its
float64 reference; and the import rewriting the Triton side of the benchmark relies on."""
import os
import sys

import pytest

torch = pytest.importorskip("torch")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from compat import loader  # noqa: E402


@pytest.fixture
def interpret(monkeypatch):
    monkeypatch.setenv("TESSERA_INTERPRET", "1")


@pytest.mark.parametrize("name", loader.module_names())
def test_kernel_runs_in_the_interpreter(interpret, name):
    loader.load_tessera(name).check("cpu")


def test_only_import_lines_are_rewritten():
    text = ("import tessera as triton\nimport tessera.language as tl\n"
            "from tessera.language.extra import libdevice\nx = 'tessera'\n"
            "def f(tessera_ptr): pass\n")
    assert loader.to_triton(text) == (
        "import triton as triton\nimport triton.language as tl\n"
        "from triton.language.extra import libdevice\nx = 'tessera'\n"
        "def f(tessera_ptr): pass\n")
