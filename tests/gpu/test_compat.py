"""The compatibility suite (tests/compat/kernels) on the GPU, each kernel against its float64
reference; with Triton installed, the same text with only its imports changed runs through
Triton too, and both must pass the same checks."""
import os
import sys

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from compat import loader  # noqa: E402


@pytest.mark.parametrize("name", loader.module_names())
def test_kernel_on_gpu(name):
    loader.load_tessera(name).check("cuda")


@pytest.mark.parametrize("name", loader.module_names())
def test_same_text_through_triton(name):
    pytest.importorskip("triton")
    loader.load_triton(name).check("cuda")
