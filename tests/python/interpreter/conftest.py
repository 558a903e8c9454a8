# Interpreter tests: fresh random inputs each run, with the seed printed (pytest shows it with
# a failure's captured output; rerun with INTERPRETER_TEST_SEED=<seed> to reproduce).
import os
import secrets

import numpy as np
import pytest


@pytest.fixture
def rng():
    seed = int(os.environ.get("INTERPRETER_TEST_SEED") or secrets.randbits(32))
    print(f"numpy seed: {seed}")
    return np.random.default_rng(seed)
