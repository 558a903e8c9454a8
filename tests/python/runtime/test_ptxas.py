"""ptxas (python/tessera/compiler/ptxas.py): hand-written PTX assembled for sm_80 and sm_90a,
-v reports parsed."""
import os

import pytest
from tessera.compiler import ptxas
from tessera.config import knobs

# Hand-written PTX vector add, shared with tests/gpu/test_runtime_driver.py.
ADD_PTX_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "data", "add_kernel.ptx")
ADD_PTX = open(ADD_PTX_PATH).read().replace("{", "{{").replace("}", "}}").replace(
    "TARGET_ARCH", "{arch}")


def spill_ptx(arch: str, live_values: int = 40) -> str:
    """A kernel that keeps `live_values` floats live under .maxnreg 24 (so it spills) and uses
    4 KiB of static shared memory."""
    n = live_values
    body = [f"    ld.global.volatile.f32 %f{i}, [%rd1+{4 * i}];" for i in range(n)]
    body.append(f"    mov.f32 %f{n}, 0f00000000;")
    body += [f"    fma.rn.f32 %f{n}, %f{n}, %f{n}, %f{i};" for i in reversed(range(n))]
    return f"""
.version 8.0
.target {arch}
.address_size 64

.visible .entry spill_kernel(.param .u64 x_ptr, .param .u64 out_ptr) .maxnreg 24
{{
    .reg .f32 %f<{n + 2}>;
    .reg .b64 %rd<3>;
    .reg .b32 %r<4>;
    .shared .align 4 .b8 tile[4096];
    ld.param.u64 %rd1, [x_ptr];
    ld.param.u64 %rd2, [out_ptr];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
{chr(10).join(body)}
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 2;
    mov.u32 %r3, tile;
    add.u32 %r3, %r3, %r2;
    st.shared.f32 [%r3], %f{n};
    bar.sync 0;
    ld.shared.f32 %f{n + 1}, [tile+4];
    st.global.f32 [%rd2], %f{n + 1};
    ret;
}}
"""


SAMPLE_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Function properties for helper
    16 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Compiling entry function 'k1' for 'sm_90a'
ptxas info    : Function properties for k1
    88 bytes stack frame, 84 bytes spill stores, 80 bytes spill loads
ptxas info    : Used 24 registers, used 1 barriers, 88 bytes cumulative stack size, 4096 bytes smem
ptxas info    : Compiling entry function 'k2' for 'sm_90a'
ptxas info    : Function properties for k2
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 168 registers, used 0 barriers, 380 bytes cmem[0]
ptxas info    : Compile time = 3.912 ms
"""

needs_ptxas = pytest.mark.skipif(ptxas.find_ptxas() is None, reason="ptxas is not installed")


def test_parse_report():
    kernels = ptxas.parse_report(SAMPLE_LOG)
    assert kernels == {
        "k1": {"registers": 24, "spill_stores": 84, "spill_loads": 80, "stack_bytes": 88,
               "shared_bytes": 4096},
        "k2": {"registers": 168, "spill_stores": 0, "spill_loads": 0, "stack_bytes": 0,
               "shared_bytes": 0},
    }
    result = ptxas.PtxasResult(b"", "sm_90a", SAMPLE_LOG, kernels)
    assert result.report == {"registers": 168, "spill_stores": 84, "spill_loads": 80,
                             "stack_bytes": 88, "shared_bytes": 4096}


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_assemble_vector_add(arch):
    result = ptxas.assemble(ADD_PTX.format(arch=arch), arch)
    assert result.cubin[:4] == b"\x7fELF"
    assert result.arch == arch
    assert list(result.kernels) == ["add_kernel"]
    report = result.report
    assert 4 <= report["registers"] <= 32
    assert report["spill_stores"] == report["spill_loads"] == report["stack_bytes"] == 0
    assert report["shared_bytes"] == 0
    assert f"'{arch}'" in result.log


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_assemble_reports_spills_and_shared_memory(arch):
    report = ptxas.assemble(spill_ptx(arch), arch).report
    assert report["registers"] <= 24
    assert report["spill_stores"] > 0 and report["spill_loads"] > 0
    assert report["stack_bytes"] >= report["spill_stores"]
    assert report["shared_bytes"] == 4096


@needs_ptxas
def test_invalid_ptx_raises_with_ptxas_output():
    with pytest.raises(ptxas.PtxasError, match="Missing .version") as failure:
        ptxas.assemble("this is not PTX\n", "sm_80")
    assert "ptxas failed for sm_80" in str(failure.value)
    assert failure.value.log


@needs_ptxas
def test_ptx_for_another_arch_is_an_error():
    with pytest.raises(ptxas.PtxasError):
        ptxas.assemble(ADD_PTX.format(arch="sm_90a"), "sm_80")


def test_arch_must_be_exact():
    with pytest.raises(ValueError):
        ptxas.assemble(ADD_PTX.format(arch="sm_80"), "80")


def test_absent_ptxas_returns_none(monkeypatch):
    monkeypatch.setattr(ptxas.shutil, "which", lambda name: None)
    monkeypatch.setattr(ptxas, "_toolkit_directories", lambda: [])
    assert ptxas.find_ptxas() is None
    assert ptxas.assemble(ADD_PTX.format(arch="sm_80"), "sm_80") is None


def test_configured_ptxas_must_exist():
    knobs.ptxas = "/nonexistent/ptxas"
    try:
        with pytest.raises(ptxas.PtxasError, match="TESSERA_PTXAS"):
            ptxas.find_ptxas()
    finally:
        knobs.reset("ptxas")


@needs_ptxas
def test_configured_ptxas_is_used():
    path = ptxas.find_ptxas()
    knobs.ptxas = path
    try:
        assert ptxas.find_ptxas() == path
        assert ptxas.version(path).count(".") == 1
    finally:
        knobs.reset("ptxas")
