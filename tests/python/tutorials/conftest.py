"""Fixtures of the attention tutorial tests: its kernels and wrappers (without the tutorial's
own checks) loaded once per module, and the interpreter switched on for one test."""
import pytest
from tessera.testing.tutorials import load_tutorial_section


@pytest.fixture(scope="module")
def tutorial():
    # Kernels, wrappers and the PyTorch integration; the tutorial's checks are left out.
    return load_tutorial_section("06-fused-attention.py", "LOG2E =",
                                 "# %% [markdown]\n# ## Correctness")


@pytest.fixture
def interpret(monkeypatch):
    monkeypatch.setenv("TESSERA_INTERPRET", "1")
