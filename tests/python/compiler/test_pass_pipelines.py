"""The compile stages run the pipelines registered in C++ (cpp/transforms/pass_pipelines.cpp):
the Python driver keeps no pass list of its own, and the pipelines' options set the module
attributes the passes read (num_warps, num_stages, wgmma only on sm_90a)."""
import os
import re
import subprocess

import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera._tessera import ir, passes
from tessera.compiler import PIPELINES, compiler
from tessera.config import knobs


@tessera.jit
def scaled_rows(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * scale, mask=mask)


@tessera.jit
def small_matmul(a_ptr, b_ptr, c_ptr, K, BLOCK: tl.constexpr):
    rows = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), tl.float32)
    for k in range(0, K, BLOCK):
        a = tl.load(a_ptr + rows[:, None] * K + k + rows[None, :])
        b = tl.load(b_ptr + (k + rows[:, None]) * BLOCK + rows[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rows[:, None] * BLOCK + rows[None, :], acc)


def registry():
    return {name: (list(names), dict(options)) for name, _, names, options in passes.pipelines()}


def test_python_reads_the_registered_pass_lists():
    assert set(registry()) >= {"tir", "tgir"}
    assert PIPELINES == {name: names for name, (names, _) in registry().items()}
    registered = {name for name, _ in passes.registered()}
    for names in PIPELINES.values():
        assert names and set(names) <= registered


def test_stage_options_are_pipeline_options():
    options = {name: set(opts) for name, (_, opts) in registry().items()}
    assert options["tir"] == {"num_warps", "check_offsets"}
    assert options["tgir"] >= {"num_warps", "num_stages", "arch", "wgmma", "wgmma_overlap",
                               "wgmma_pipeline"}


def test_dump_follows_the_registered_order(monkeypatch, capfd):
    monkeypatch.setattr(tessera.config.knobs, "dump", "all")
    x = np.zeros(300, np.float32)
    scaled_rows.asm(x, x, 300, 2.0, BLOCK=128, arch="sm_80")
    dumped = re.findall(r"IR after (\w+)", capfd.readouterr().err)
    assert dumped == PIPELINES["tir"] + PIPELINES["tgir"]


@pytest.mark.parametrize("arch,wgmma", [("sm_80", 0), ("sm_90a", 1)])
def test_options_reach_the_module(arch, wgmma):
    a = np.zeros((64, 64), np.float16)
    c = np.zeros((64, 64), np.float32)
    asm = small_matmul.asm(a, a, c, 64, BLOCK=64, arch=arch, num_warps=4, num_stages=3)
    assert asm["tir"].startswith("module {num_warps = 4}")
    header = next(line for line in asm["tgir"].splitlines() if line.startswith("module"))
    assert "num_stages = 3" in header and f"wgmma = {wgmma}" in header
    assert ("version = 3" in asm["tgir"]) == bool(wgmma)  # wgmma's #mma


def test_bad_option_is_refused_before_running():
    module = ir.parse_module("func @k() {\n  return : () -> ()\n}\n")
    with pytest.raises(ValueError, match="has no option 'nope'"):
        passes.run_pipeline(module, "tir", {"nope": 1})
    with pytest.raises(ValueError, match="num_stages must be an integer >= 0, got 'x'"):
        passes.run_pipeline(module, "tgir", {"num_stages": "x"})
    with pytest.raises(ValueError, match="unknown pipeline 'tgirr'"):
        passes.run_pipeline(module, "tgirr")
    assert "num_stages" not in module.attrs


def test_tessera_opt_runs_the_same_pipeline(tmp_path):
    """The driver's tgir stage and `tessera-opt --pass-pipeline=tgir{...}` on its tir give the
    same text."""
    opt = compiler.__file__.replace("compiler/compiler.py", "_bin/tessera-opt")
    candidates = [opt, os.path.join(os.path.dirname(__file__), "../../../build/bin/tessera-opt")]
    found = [c for c in candidates if os.access(c, os.X_OK)]
    if not found:
        pytest.skip("tessera-opt not built")
    x = np.zeros(300, np.float32)
    asm = scaled_rows.asm(x, x, 300, 2.0, BLOCK=128, arch="sm_80", num_stages=2)
    path = tmp_path / "k.ir"
    path.write_text(asm["tir"])
    options = (f"num_stages=2 arch=sm_80 wgmma=1 wgmma_overlap=1 "
               f"wgmma_pipeline={int(knobs.wgmma_pipeline)}")
    out = subprocess.run([found[0], str(path), f"--pass-pipeline=tgir{{{options}}}"],
                         capture_output=True, text=True, check=True)
    assert out.stdout == asm["tgir"]


def test_every_pass_name_is_snake_case():
    """One naming style for every registered pass and pipeline (test passes: test_<what>)."""
    names = [name for name, _ in passes.registered()] + list(registry())
    bad = [name for name in names if not re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", name)]
    assert not bad, f"pass names not in snake_case: {bad}"
