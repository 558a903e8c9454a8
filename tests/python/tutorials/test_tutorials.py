# Every tutorial runs in interpret mode, on the CPU, at the small sizes it picks without a GPU,
# as its own process (a fresh interpreter, as a reader would run it). Each tutorial checks its
# kernels against NumPy and fails with a non-zero exit status when a result is wrong.
import subprocess
import sys
from pathlib import Path

import pytest
from tessera.testing.environment import child_env

ROOT = Path(__file__).resolve().parents[3]
TUTORIALS = sorted((ROOT / "tutorials").glob("[0-9][0-9]-*.py"))


def test_the_tutorials_are_found():
    assert any(path.name == "01-vector-add.py" for path in TUTORIALS), TUTORIALS


@pytest.mark.parametrize("path", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_tutorial_runs_interpreted(path, tmp_path):
    env = child_env(**{
        "TESSERA_INTERPRET": "1",
        "CUDA_VISIBLE_DEVICES": "",  # no GPU, even on a machine that has one
        "TESSERA_CACHE_DIR": str(tmp_path / "cache"),
        "TUTORIAL_PLOT": str(tmp_path / "plot.png"),
    })
    result = subprocess.run([sys.executable, str(path), "--no-bench"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{path.name} exited with {result.returncode}:\n{output}"
    assert result.stdout.strip(), f"{path.name} printed nothing"
