"""scripts/public_kernels.py --gpu on a small folder written here: a Triton file run compiled
on Tessera (imports rewritten) and on Triton (as written), each side checked against torch and
timed; the record carries both times and their ratio, the table a geomean. A driver with
``bench`` times its own callables; one without it times its ``run``."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from tessera.testing.environment import child_env

torch = pytest.importorskip("torch")
pytest.importorskip("triton")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "public_kernels.py")

KERNEL = textwrap.dedent("""\
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def _axpy(x_ptr, y_ptr, out_ptr, n, a, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, a * x + y, mask=mask)


    def axpy(a, x, y):
        out = torch.empty_like(x)
        _axpy[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), a, BLOCK=1024)
        return out
    """)
DRIVERS = textwrap.dedent("""\
    def run(m, torch):
        x, y = torch.randn(100_003), torch.randn(100_003)
        return [("out", m.axpy(2.5, x, y), 2.5 * x.double() + y.double())]


    def bench(m, torch):
        x, y = torch.randn(1 << 22), torch.randn(1 << 22)
        return [("axpy_4M", lambda: m.axpy(2.5, x, y))]


    DRIVERS = {"axpy.py": dict(run=run, bench=bench, rtol=1e-5, atol=1e-5),
               "axpy_run.py": dict(run=run, rtol=1e-5, atol=1e-5)}
    """)


def test_gpu_mode_times_both_sides(tmp_path):
    folder = tmp_path / "kernels"
    folder.mkdir()
    for name, text in (("axpy.py", KERNEL), ("axpy_run.py", KERNEL), ("drivers.py", DRIVERS)):
        (folder / name).write_text(text)
    out = tmp_path / "results.json"
    done = subprocess.run([sys.executable, SCRIPT, str(folder), "--gpu", "--json", str(out)],
                          env=child_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads(out.read_text())
    for name, label in (("axpy.py", "axpy_4M"), ("axpy_run.py", "axpy_run")):
        record = results[name]
        assert record["status"] == "passed", record
        assert set(record["times_ms"]) == set(record["triton_times_ms"]) == {label}, record
        assert record["times_ms"][label] > 0 and record["triton_times_ms"][label] > 0
        ratio = record["triton_over_tessera"][label]
        assert ratio == pytest.approx(record["triton_times_ms"][label] / record["times_ms"][label])
    assert "geomean" in done.stdout and "over 2 kernels" in done.stdout, done.stdout
