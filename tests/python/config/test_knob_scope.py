"""knobs.scope: overrides inside a `with` block, then back to what was there before (an
earlier override or the environment), also when the block raises; unknown knobs are errors."""
import pytest
from tessera.config import knobs


@pytest.fixture(autouse=True)
def clean_knobs():
    knobs.reset()
    yield
    knobs.reset()


def test_scope_overrides_then_follows_the_environment_again(monkeypatch):
    monkeypatch.setenv("TESSERA_INTERPRET", "0")
    with knobs.scope(interpret=True, always_compile=True) as scoped:
        assert scoped is knobs
        assert knobs.interpret is True and knobs.always_compile is True
    assert knobs.interpret is False
    monkeypatch.setenv("TESSERA_INTERPRET", "1")  # no override left: the environment rules
    assert knobs.interpret is True


def test_scope_restores_an_earlier_override_even_on_errors():
    knobs.wgmma = False
    with pytest.raises(ValueError):
        with knobs.scope(wgmma=True):
            assert knobs.wgmma is True
            raise ValueError("inside")
    assert knobs.wgmma is False
    with knobs.scope(wgmma=True):
        with knobs.scope(wgmma=False):
            assert knobs.wgmma is False
        assert knobs.wgmma is True
    assert knobs.wgmma is False


def test_unknown_knob_is_an_error_and_changes_nothing():
    with pytest.raises(AttributeError, match="no knob 'interpet'"):
        with knobs.scope(interpret=True, interpet=True):
            pass
    assert "interpret" not in knobs._overrides
