"""The package as pip installs it (what `make test` and CI test): every Python file of the
checkout's python/tessera is in it, its console scripts run the packaged tessera-opt and the
cache tool, and it imports from any directory without PYTHONPATH. Under an in-tree build
(PYTHONPATH=python) the installed-only checks skip, and tessera-opt's wrapper says it is absent.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tessera
from tessera import _tessera
from tessera.testing.environment import child_env, package_root

CHECKOUT = Path(__file__).resolve().parents[3] / "python" / "tessera"
PACKAGE = Path(tessera.__file__).resolve().parent
INSTALLED = package_root() is None and PACKAGE != CHECKOUT  # not an in-tree or editable build
# Where pip puts tessera-opt: beside the binding (in site-packages, also for editable installs).
BINARY = Path(_tessera.__file__).resolve().parent / "_bin" / "tessera-opt"
installed_only = pytest.mark.skipif(not INSTALLED, reason="tessera is not pip-installed here")


def python_files(root: Path):
    return {p.relative_to(root).as_posix() for p in root.rglob("*.py")
            if "__pycache__" not in p.parts}


@installed_only
def test_every_python_file_is_installed():
    missing = python_files(CHECKOUT) - python_files(PACKAGE)
    assert not missing, f"not in the installed package (reinstall?): {sorted(missing)}"
    assert (PACKAGE / "_lib" / "libtessera_core.so").is_file()
    assert list(PACKAGE.glob("_tessera*.so")) and BINARY.is_file()


@installed_only
def test_imports_anywhere_without_pythonpath(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", "import tessera; print(tessera.__file__)"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).resolve().parent == PACKAGE


def run_script(name: str, *args: str) -> subprocess.CompletedProcess:
    """A console script beside this Python (pip puts them there), else its entry function."""
    script = Path(sys.executable).parent / name
    entry = {"tessera-opt": "tessera_opt", "tessera-cache": "tessera_cache"}[name]
    command = ([str(script)] if script.is_file() else
               [sys.executable, "-c", f"import sys; from tessera._cli import {entry}; "
                                      f"sys.argv[0] = {name!r}; {entry}()"])
    return subprocess.run([*command, *args], env=child_env(), capture_output=True, text=True,
                          timeout=120)


def test_tessera_opt_runs_the_packaged_binary():
    done = run_script("tessera-opt", "--list-passes")
    if BINARY.is_file():
        assert done.returncode == 0, done.stderr
        assert "--canonicalize" in done.stdout and "--cse" in done.stdout
    else:  # an in-tree build has build/bin/tessera-opt instead
        assert done.returncode != 0 and "not part of this installation" in done.stderr


def test_tessera_cache_script(tmp_path):
    done = run_script("tessera-cache", "size", "--dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "0 entries" in done.stdout
