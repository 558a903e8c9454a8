# Autotuner tests: each test gets its own cache directory; fakes.py is importable.
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tessera.config import knobs  # noqa: E402


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path):
    knobs.cache_dir = str(tmp_path / "cache")
    knobs.autotune_progress = False
    knobs.autotune = ""
    yield tmp_path / "cache"
    knobs.reset()
