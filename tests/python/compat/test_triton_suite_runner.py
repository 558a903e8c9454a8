"""scripts/triton_suite.py: import rewriting, failure grouping, and one end-to-end run over a
small Triton-style test folder (written here; Triton's own files are not in the repository)."""
import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest

from tessera.testing.environment import child_env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(ROOT, "scripts", "triton_suite.py")


def _load():
    spec = importlib.util.spec_from_file_location("triton_suite", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_only_import_lines_change_and_lines_stay_put():
    suite = _load()
    source = textwrap.dedent("""\
        import triton
        import triton.language as tl
        from triton._internal_testing import (numpy_random,
                                              to_triton)
        def f():
            from triton.runtime import driver  # inside a function
            import triton.runtime.jit
        x = "import triton"  # a string is not an import
        import tritonic
    """)
    out = suite.rewrite_imports(source).splitlines()
    assert out[0] == "import tessera as triton"
    assert out[1] == "import tessera.language as tl"
    assert out[2] == "from tessera._internal_testing import (numpy_random,"
    assert out[3] == source.splitlines()[3]
    assert out[5] == "    from tessera.runtime import driver  # inside a function"
    assert out[6] == "    import tessera.runtime.jit; import tessera as triton"
    assert out[7] == source.splitlines()[7] and out[8] == "import tritonic"
    assert len(out) == len(source.splitlines())


def test_failure_reasons_group_across_positions_and_addresses():
    suite = _load()
    a = suite._reason_key("CompilationError: k: /tmp/x1/tests/language/test_core.py:12:5: bad dot")
    b = suite._reason_key("CompilationError: k: /tmp/x2/tests/language/test_core.py:99:1: bad dot")
    assert a == b == "CompilationError: k: test_core.py: bad dot"
    key = suite._reason_key("ValueError: <function f at 0x7f00ab>")
    assert key == "ValueError: <function f at 0x..>"


FAKE_TESTS = '''
import numpy as np
import pytest
import triton
import triton.language as tl


@triton.jit
def add_one(X, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(X + offs, tl.load(X + offs) + 1)


@pytest.mark.interpreter
@pytest.mark.parametrize("n", [8, 16, 32])
def test_passes(n, device):
    x = np.arange(n, dtype=np.float32)
    add_one[(1, )](x, n)
    assert (x == np.arange(n) + 1).all()


@pytest.mark.interpreter
def test_fails(device):
    raise KeyError("on purpose")


@pytest.mark.interpreter
def test_skips(device):
    pytest.skip("not here")


def test_not_for_the_interpreter(device):
    raise AssertionError("never run: Triton runs only interpreter-marked tests there")
'''

CONFTEST = '''
import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "interpreter: runs in the interpreter")


def pytest_addoption(parser):
    parser.addoption("--device", action="store", default="cuda")


@pytest.fixture
def device(request):
    return request.config.getoption("--device")
'''


def test_end_to_end_counts(tmp_path):
    pytest.importorskip("pytest_timeout")
    tests = tmp_path / "tests"
    (tests / "language").mkdir(parents=True)
    (tests / "conftest.py").write_text(CONFTEST)
    (tests / "language" / "test_fake.py").write_text(FAKE_TESTS)
    out = tmp_path / "summary.json"
    proc = subprocess.run([sys.executable, SCRIPT, str(tests), "--json", str(out),
                           "--timeout", "60"],
                          env=child_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads(out.read_text())["summary"]
    assert summary["total"] == {"passed": 3, "failed": 1, "skipped": 1, "not_interpreted": 1}
    assert summary["rate"] == pytest.approx(0.75)
    assert summary["reasons"] == [["KeyError: 'on purpose'", 1]]
    assert "test_fake.py" in proc.stdout and "rate=75.0%" in proc.stdout


def test_a_sample_counts_only_its_cases(tmp_path):
    pytest.importorskip("pytest_timeout")
    tests = tmp_path / "tests"
    (tests / "language").mkdir(parents=True)
    (tests / "conftest.py").write_text(CONFTEST)
    (tests / "language" / "test_fake.py").write_text(FAKE_TESTS)
    out = tmp_path / "summary.json"
    proc = subprocess.run([sys.executable, SCRIPT, str(tests), "--json", str(out), "--sample", "2",
                           "--offset", "0"], env=child_env(), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    total = json.loads(out.read_text())["summary"]["total"]
    # every 2nd case: passes[8], passes[32] and test_skips (test_fails is left out)
    assert total.get("passed") == 2 and total.get("failed", 0) == 0 and total.get("skipped") == 1
