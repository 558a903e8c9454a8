"""The notebook sequence of tests/gpu/test_notebook.py on the recording launchers: a kernel
that calls a @jit helper and reads a tl.constexpr global; asm() first, two launches (the second
from C++), the helper redefined, then the global rebound: each change gives a new kernel."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "jit"))
from launch_fakes import FakeGpu  # noqa: E402

import tessera  # noqa: E402
import tessera.language as tl  # noqa: E402
from tessera.config import knobs  # noqa: E402

OFFSET = tl.constexpr(0.0)


@tessera.jit
def helper(v):
    return v * 2


@tessera.jit
def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, helper(tl.load(x_ptr + offs, mask=mask)) + OFFSET, mask=mask)


def test_helper_then_global_rebinding_recompiles(monkeypatch):
    global helper, OFFSET
    torch = pytest.importorskip("torch")
    knobs.interpret = False
    gpu = FakeGpu(monkeypatch)
    try:
        x = torch.randn(1000)
        out = torch.empty_like(x)
        assert "ld.global" in scale.asm(x, out, 1000, BLOCK=256, arch="sm_90a")["ptx"]
        for _ in range(2):
            scale[(4,)](x, out, 1000, BLOCK=256)
        assert len(gpu.prepared) == 1

        @tessera.jit
        def helper(v):  # noqa: F811 - the redefinition is the point
            return v * 3
        globals()["helper"] = helper
        scale[(4,)](x, out, 1000, BLOCK=256)
        assert len(gpu.prepared) == 2, "the old helper's kernel was served"

        OFFSET = tl.constexpr(100.0)
        scale[(4,)](x, out, 1000, BLOCK=256)
        assert len(gpu.prepared) == 3, "the old global's kernel was served"
    finally:
        OFFSET = tl.constexpr(0.0)
        knobs.reset("interpret")
