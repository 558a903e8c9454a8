"""scripts/public_kernels.py end to end over a small folder written here (public kernel files are
not in the repository): a Triton-style file whose wrapper matches its torch reference (passed),
one with a wrong reference (wrong), one that raises (error, with the kernel file's line), a
helper served to another file under a library module name, and a stubbed relative import."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from tessera.testing.environment import child_env

pytest.importorskip("torch")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(ROOT, "scripts", "public_kernels.py")

KERNEL = textwrap.dedent("""\
    import torch
    import triton
    import triton.language as tl
    from mylib.helpers import block_for
    from .utils import scale_of


    @triton.jit
    def _scale(x_ptr, y_ptr, n, s, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * s, mask=mask)


    def scale(x):
        y = torch.empty_like(x)
        block = block_for(x.numel())
        _scale[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), scale_of(), BLOCK=block)
        return y
    """)
HELPER = textwrap.dedent("""\
    import triton


    def block_for(n):
        return min(64, triton.next_power_of_2(n))
    """)
BROKEN = textwrap.dedent("""\
    import triton
    import triton.language as tl


    @triton.jit
    def _bad(x_ptr):
        tl.store(x_ptr, tl.no_such_function(1))


    def run(x):
        _bad[(1,)](x)
    """)
DRIVERS = textwrap.dedent("""\
    STUBS = {"mylib.helpers": "@helper.py", ".utils": {"scale_of": lambda: 3.0}}


    def good(m, torch):
        x = torch.randn(100)
        return [("y", m.scale(x), x * 3.0)]


    def bad_reference(m, torch):
        x = torch.randn(100)
        return [("y", m.scale(x), x * 2.0)]


    def broken(m, torch):
        m.run(torch.zeros(4))
        return []


    DRIVERS = {"good.py": dict(stubs=STUBS, run=good),
               "wrong.py": dict(stubs=STUBS, run=bad_reference),
               "broken.py": dict(run=broken),
               "skipped.py": dict(skip="needs a GPU-only library")}
    """)


def test_runner_classifies_files(tmp_path):
    folder = tmp_path / "kernels"
    folder.mkdir()
    for name, text in (("good.py", KERNEL), ("wrong.py", KERNEL), ("helper.py", HELPER),
                       ("broken.py", BROKEN), ("skipped.py", "import triton\n"),
                       ("drivers.py", DRIVERS)):
        (folder / name).write_text(text)
    out = tmp_path / "results.json"
    done = subprocess.run([sys.executable, SCRIPT, str(folder), "--json", str(out)],
                          env=child_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    results = json.loads(out.read_text())
    assert results["good.py"]["status"] == "passed", results
    assert results["wrong.py"]["status"] == "wrong"
    assert results["wrong.py"]["reason"].startswith("y:")
    assert results["broken.py"]["status"] == "error"
    assert "no_such_function" in results["broken.py"]["reason"]
    assert results["skipped.py"] == {"status": "skipped", "reason": "needs a GPU-only library"}
    assert results["helper.py"]["status"] == "skipped"  # a helper: no driver of its own
    assert "passed=1 wrong=1 error=1 skipped=2" in done.stdout
