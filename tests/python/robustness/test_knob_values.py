"""Boolean knobs accept 1/true/yes/on and 0/false/no/off; a typo is an error naming the
variable, on the launch path too (TESSERA_INTERPRET=ture must not read as off)."""
import numpy as np
import pytest
import tessera
import tessera.language as tl
from tessera.config import knobs


@tessera.jit
def fill(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), 7)


@pytest.mark.parametrize("text, value", [("1", True), ("TRUE", True), (" yes ", True),
                                         ("on", True), ("0", False), ("False", False),
                                         ("no", False), ("off", False)])
def test_boolean_texts(monkeypatch, text, value):
    monkeypatch.setenv("TESSERA_ALWAYS_COMPILE", text)
    assert knobs.always_compile is value


@pytest.mark.parametrize("text", ["ture", "2", "enable", "y3s"])
def test_non_boolean_text_is_an_error_naming_the_variable(monkeypatch, text):
    monkeypatch.setenv("TESSERA_INTERPRET", text)
    with pytest.raises(ValueError, match=f"TESSERA_INTERPRET: '{text}' is not a boolean"):
        knobs.interpret


def test_a_launch_with_a_misspelled_interpret_knob_fails(monkeypatch):
    x = np.zeros(16, np.int32)
    monkeypatch.setenv("TESSERA_INTERPRET", "1")
    fill[(1,)](x, BLOCK=16)  # registers nothing with the C++ path: interpreted launches
    assert (x == 7).all()
    monkeypatch.setenv("TESSERA_INTERPRET", "ture")
    with pytest.raises(ValueError, match="TESSERA_INTERPRET"):
        fill[(1,)](x, BLOCK=16)
