"""tessera.report without a GPU: the static part of the per-kernel report (registers, spills,
shared memory) against `ptxas -v` run and parsed here independently, the occupancy against
the CUDA occupancy rules worked by hand, an autotuned kernel reported for the config it would
use, the roofline arithmetic, and the command line (`python -m tessera.report`)."""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import pytest
import tessera
import tessera.language as tl
from tessera.compiler import ptxas
from tessera.report import NEEDS_GPU, KernelReport, PEAKS, peaks, report, table

needs_ptxas = pytest.mark.skipif(ptxas.find_ptxas() is None, reason="ptxas not installed")


@tessera.jit
def scale_rows_kernel(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, x * alpha + tl.sum(x, axis=0), mask=offs < n)


def ptxas_numbers(ptx: str, arch: str) -> dict:
    """registers, spill stores/loads and static smem of the PTX's kernel, from ptxas -v."""
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "k.ptx")
        with open(path, "w") as f:
            f.write(ptx)
        done = subprocess.run([ptxas.find_ptxas(), f"-arch={arch}", "-v", "-O3", "-o",
                               os.path.join(directory, "k.cubin"), path],
                              capture_output=True, text=True, check=True)
    log = done.stdout + done.stderr
    used = re.search(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?", log)
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    return {"registers": int(used.group(1)), "static_shared_bytes": int(used.group(2) or 0),
            "spill_stores": int(spills.group(1)), "spill_loads": int(spills.group(2))}


def occupancy_by_hand(registers, threads, shared, regs_per_sm=65536, smem_per_sm=233472,
                      max_threads=2048, max_blocks=32):
    """Blocks per SM by the CUDA rules: warps' registers in units of 256, 1 KiB of shared
    memory reserved per block."""
    warps = -(-threads // 32)
    per_warp = -(-registers * 32 // 256) * 256
    limits = [max_blocks, max_threads // threads, regs_per_sm // (warps * per_warp)]
    if shared:
        limits.append(smem_per_sm // (shared + 1024))
    return min(limits)


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_static_part_agrees_with_ptxas(arch):
    x = np.zeros(4096, np.float32)
    rep = scale_rows_kernel.report(x, x, x.size, 2.0, BLOCK=2048, grid=(2,), num_warps=8,
                                   arch=arch, file=None)
    compiled = scale_rows_kernel.compile(x, x, x.size, 2.0, BLOCK=2048, num_warps=8, arch=arch)
    expected = ptxas_numbers(compiled.asm["ptx"], arch)
    for name, value in expected.items():
        assert getattr(rep, name) == value, (name, rep)
    assert rep.shared_bytes == compiled.metadata["shared_bytes"] > 0  # the reduction's scratch
    assert rep.num_warps == 8 and rep.time_ms is None
    smem_per_sm = 233472 if arch == "sm_90a" else 167936
    assert rep.blocks_per_sm == occupancy_by_hand(rep.registers, 256, rep.shared_bytes
                                                  + rep.static_shared_bytes,
                                                  smem_per_sm=smem_per_sm)
    assert rep.occupancy == rep.blocks_per_sm * 256 / 2048


@needs_ptxas
def test_autotuned_kernel_reports_the_config_it_would_use():
    import tessera.ops.flash_attention as fa
    from tessera.ops.flash_attention.forward import _tuned_fwd
    S, D = 512, 128
    q = np.zeros((1, 2, S, D), np.float16)
    lse = np.zeros((1, 2, S), np.float32)
    st = tuple(s // 2 for s in q.strides[:3])
    rep = _tuned_fwd.report(q, q, q, q, lse, 0.1, 2, S, *st * 4, D=D, CAUSAL=True,
                            RELOAD=False, grid=(4, 2), arch="sm_90a", file=None,
                            bytes=lambda a: 4 * 2 * a["S"] * a["D"] * 2,
                            flops=lambda a: 2 * 2 * 2 * a["S"] ** 2 * a["D"] / 2)
    block_m, block_n, warps, stages = fa.config("fwd", q, "sm_90a")
    assert rep.config == {"BLOCK_M": block_m, "BLOCK_N": block_n, "num_warps": warps,
                          "num_stages": stages}
    assert (rep.num_warps, rep.num_stages) == (warps, stages)
    assert rep.spill_stores == 0 and rep.registers > 0 and rep.shared_bytes > 0
    assert rep.bytes == 4 * 2 * S * D * 2 and rep.flops == 2 * 2 * 2 * S * S * D / 2
    assert "BLOCK_M=" in str(rep) and "roofline time" in str(rep)


def test_roofline_arithmetic():
    bandwidth, flops = peaks("NVIDIA H100 80GB HBM3")
    assert (bandwidth, flops) == (3.35e12, 989e12)
    assert peaks("NVIDIA H200")[0] == 4.8e12 and peaks("NVIDIA A100-SXM4-40GB")[1] == 312e12
    assert peaks("Tesla T4") is None and all(len(row) == 3 for row in PEAKS)
    rep = KernelReport("k", "sm_90a", "H100", bytes=3.35e9, flops=989e9, time_ms=2.0,
                       peak_bandwidth=bandwidth, peak_flops=flops)
    assert rep.roofline_ms == pytest.approx(1.0)
    assert rep.fraction("bandwidth") == pytest.approx(0.5)
    assert rep.fraction("flops") == pytest.approx(0.5)
    text = str(rep)
    assert "memory bandwidth of peak50.0%" in text.replace(" ", "") or "50.0%" in text
    assert KernelReport("k", "sm_90a", "H100").fraction("flops") is None


def test_unknown_arch_without_gpu_is_a_clear_error():
    x = np.zeros(16, np.float32)
    with pytest.raises(ValueError, match="report\\(scale_rows_kernel\\): no device properties "
                                         "for arch 'sm_75'"):
        report(scale_rows_kernel, x, x, 16, 1.0, BLOCK=16, grid=(1,), arch="sm_75")


SCRIPT = '''
import numpy as np
import tessera
import tessera.language as tl
from tessera.report import case

@tessera.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

def report_cases():
    x = np.zeros(1 << 16, np.float32)
    return [case(copy_kernel, x, x, x.size, BLOCK=b, grid=(x.size // b,),
                 bytes=lambda a: 8 * a["n"]) for b in (256, 1024)]
'''


@needs_ptxas
def test_command_line_reports_each_case(tmp_path):
    script = tmp_path / "cases.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-m", "tessera.report", str(script), "--arch",
                           "sm_80", "--json"], capture_output=True, text=True, env=env,
                          check=True)
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["kernel"] for r in rows] == ["copy_kernel"] * 2
    assert all(r["arch"] == "sm_80" and r["bytes"] == 8 << 16 and r["registers"] > 0
               for r in rows)
    assert rows[0]["roofline_ms"] == pytest.approx(1e3 * (8 << 16) / 2.0e12)
    text = subprocess.run([sys.executable, "-m", "tessera.report", str(script), "--arch",
                           "sm_90a"], capture_output=True, text=True, env=env, check=True)
    assert text.stdout.count("registers/thread") == 2


@needs_ptxas
def test_library_kernels_report_their_arch_configs_without_spills():
    # benchmarks/kernel_reports.py through the command line for sm_90a: the attention
    # autotuners prune for the reported arch (wgmma tiles), and the library's default
    # configs spill nothing.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-m", "tessera.report",
                           os.path.join(root, "benchmarks", "kernel_reports.py"), "--arch",
                           "sm_90a", "--json"], capture_output=True, text=True, env=env,
                          check=True)
    rows = {r["kernel"]: r for r in map(json.loads, done.stdout.splitlines())}
    assert rows["attention_fwd_kernel"]["config"]["BLOCK_M"] == 128
    for name, row in rows.items():
        assert row["arch"] == "sm_90a" and row["bytes"] > 0 and row["flops"] > 0, name
        assert row["spill_stores"] == 0, row
    assert len(rows) == 8


@needs_ptxas
def test_static_table_says_what_needs_a_gpu(tmp_path):
    # Without a GPU: ptxas's figures and the occupancy from the arch's limits in the table,
    # "needs a GPU" in the measured columns (the roofline time is the model's, so it stays).
    script = tmp_path / "cases.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-m", "tessera.report", str(script), "--arch",
                           "sm_80", "--table"], capture_output=True, text=True, env=env,
                          check=True)
    lines = done.stdout.splitlines()
    assert lines[0] == "# sm_80 (static: no GPU, so no times)"
    header, rows = lines[1].split(), lines[2:]
    assert header[:3] == ["kernel", "config", "regs"] and len(rows) == 2
    for row in rows:
        assert row.startswith("copy_kernel  w4s1 "), row
        assert row.count(NEEDS_GPU) == 2 and " 0/0 " in row, row  # time, bandwidth; no spills
    x = np.zeros(1 << 16, np.float32)
    text = str(report(scale_rows_kernel, x, x, x.size, 1.0, BLOCK=256, grid=(1,),
                      arch="sm_80", file=None, bytes=8 << 16))
    assert f"time                {NEEDS_GPU}" in text
    assert f"memory bandwidth of peak {NEEDS_GPU}" in text
    assert "tensor cores of peak" not in text  # no FLOP model given
    assert NEEDS_GPU not in table([KernelReport("k", "sm_90a", "H100", time_ms=1.0)])


@needs_ptxas
def test_command_line_makes_the_cases_for_the_reported_arch():
    # A report_cases function that picks its tiles per arch (masked attention's) runs with
    # --arch in effect: sm_80 gets sm_80's tiles (wgmma tiles there spill 40-132 bytes).
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-m", "tessera.report",
                           os.path.join(root, "benchmarks", "kernel_reports.py"), "--arch",
                           "sm_80", "--json"], capture_output=True, text=True, env=env,
                          check=True)
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(rows) == 8 and all(r["arch"] == "sm_80" for r in rows)
    assert [r for r in rows if r["spill_stores"] or r["spill_loads"]] == []
