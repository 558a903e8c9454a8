"""A vector-add kernel (tutorial 01's) compiles through every stage for sm_80 and sm_90a, ptxas
accepts it with zero spills, and 16-byte-aligned f32/f16 accesses become 128-bit vector loads."""
import re

import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.compiler import ptxas


@tessera.jit
def vector_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # As tutorials/01-vector-add.py teaches it.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


@pytest.fixture(scope="module")
def add_kernel():
    return vector_add_kernel


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("dtype,width", [(np.float32, 4), (np.float16, 8)])
def test_stages_and_vector_loads(add_kernel, arch, dtype, width):
    x = np.zeros(4096, dtype=dtype)
    stages = add_kernel.asm(x, x, x, 4096, BLOCK=1024, arch=arch)
    for stage in ("tir", "tgir", "llir", "ptx"):
        assert stages[stage], stage
    assert "convert_layout" not in stages["tgir"]
    loads = re.findall(r"ld\.global\.v4\.b32", stages["ptx"])
    stores = re.findall(r"st\.global\.v4\.b32", stages["ptx"])
    # 1024 elements / 128 threads = 8 per thread: 8 * size / 16 bytes vectors per operand.
    per_thread_vectors = 8 * x.itemsize // 16
    assert len(loads) == 2 * per_thread_vectors and len(stores) == per_thread_vectors
    if ptxas.find_ptxas() is None:
        pytest.skip("ptxas not found: PTX not assembled")
    assert stages["cubin"][:4] == b"\x7fELF"
    result = ptxas.assemble(stages["ptx"], arch)
    assert result.report["spill_stores"] == 0 and result.report["spill_loads"] == 0


def test_unaligned_size_falls_back_to_scalar_masked_accesses(add_kernel):
    x = np.zeros(4096, dtype=np.float32)
    ptx = add_kernel.asm(x, x, x, 4095, BLOCK=1024, arch="sm_90a")["ptx"]
    # n is not a multiple of 16: the mask may change inside a vector, so accesses are scalar.
    assert "ld.global.v4" not in ptx
    assert "ld.global.b32" in ptx or "ld.global.f32" in ptx
