"""The interpreter switched on for one test (the ops then run NumPy arrays on the CPU)."""
import pytest
import tessera


@pytest.fixture
def interpret():
    # A scope, not the environment: it wins over (and then restores) any override in force.
    with tessera.config.knobs.scope(interpret=True):
        yield
