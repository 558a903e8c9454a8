"""runtime/prewarm.py: ``import tessera`` does the first compile's set-up on a thread that
writes nothing, makes the same build id as the launch path, and is waited for by fork."""
import json
import os
import subprocess
import sys

import pytest

from tessera.testing.environment import child_env

PROBE = r"""
import json, os, sys, threading
import tessera
from tessera.runtime import prewarm
running = [t.name for t in threading.enumerate() if t.name == "tessera-prewarm"]
prewarm.wait()
loaded = "tessera.compiler.compiler" in sys.modules
from tessera.runtime import launcher
build_id = launcher.compiler_build_id()
print("RESULT", json.dumps({"started": prewarm._thread is not None, "loaded": loaded,
                           "build_id": build_id}))
"""


def _run(tmp_path, code, **variables):
    cache = tmp_path / "cache"
    env = child_env(TESSERA_CACHE_DIR=str(cache), **variables)
    env.pop("TESSERA_INTERPRET", None)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    line = next(l for l in done.stdout.splitlines() if l.startswith("RESULT "))
    return json.loads(line.split(" ", 1)[1]), cache


def test_the_thread_loads_the_compiler_and_gives_the_same_build_id(tmp_path):
    on, cache_on = _run(tmp_path / "on", PROBE, TESSERA_PREWARM="1")
    off, cache_off = _run(tmp_path / "off", PROBE, TESSERA_PREWARM="0")
    assert on["started"] and on["loaded"]
    assert not off["started"] and not off["loaded"]
    assert on["build_id"] == off["build_id"]


def test_off_by_default(tmp_path):
    result, _ = _run(tmp_path, PROBE)
    assert not result["started"] and not result["loaded"]


def test_the_thread_writes_nothing(tmp_path):
    code = "import tessera\ntessera.runtime.prewarm.wait()\nprint('RESULT {}')\n"
    _, cache = _run(tmp_path, code, TESSERA_PREWARM="1")
    assert not cache.exists() or not any(cache.rglob("*"))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_fork_right_after_the_import_waits_for_it(tmp_path):
    code = r"""
import os, sys
import tessera
pid = os.fork()
if pid == 0:
    from tessera.compiler import compiler  # a half-imported module would hang here
    os._exit(0 if compiler.compile_kernel else 1)
_, status = os.waitpid(pid, 0)
print("RESULT", os.waitstatus_to_exitcode(status))
"""
    status, _ = _run(tmp_path, code, TESSERA_PREWARM="1")
    assert status == 0
