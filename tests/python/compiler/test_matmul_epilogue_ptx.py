"""The matmul epilogue and main loop in Triton 3.6's shape, without a GPU
(docs/perf/matmul_sass.md): on sm_90a the f16 product goes to shared memory with stmatrix.x4
(16 bytes per lane; st.shared.b32 moved 4), is read back 16 bytes per lane and stored to C
with predicated st.global.v4 (no branch around a store, so the eight shared-memory reads are
issued together); the pipelined loop has no fence.proxy.async after its cp.async wait. sm_80
has no stmatrix and keeps st.shared. Every kernel is assembled by ptxas without spills. The
instructions are codegen's only: the IR the interpreter runs is unchanged."""
import re

import ml_dtypes
import numpy as np
import pytest
from tessera.compiler import ptxas
from tessera.ops import gemm

# gemm.CONFIGS plus the 128x256x64 one Triton's tutorial tunes to on the H100.
SHAPES = [(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"], c.num_warps,
           c.num_stages) for c in gemm.CONFIGS] + [(128, 256, 64, 8, 3)]
IDS = ["{}x{}x{}-w{}-s{}".format(*shape) for shape in SHAPES]


def compile_matmul(shape, size, arch="sm_90a", dtype=np.float16):
    block_m, block_n, block_k, num_warps, num_stages = shape
    x = np.zeros((size, size), dtype)
    return gemm.matmul_kernel.compile(
        x, x, x, x, size, size, size, size, 1, size, 1, size, 1, BLOCK_M=block_m,
        BLOCK_N=block_n, BLOCK_K=block_k, GROUP_SIZE_M=8, HAS_BIAS=False, ACTIVATION="",
        num_warps=num_warps, num_stages=num_stages, arch=arch)


def epilogue(ptx: str) -> str:
    """The PTX after the main loop's back edge (the last branch to an earlier label)."""
    back_edge = list(re.finditer(r"bra(?:\.uni)?\s+(\$L__BB\d+_\d+);", ptx))[-1]
    return ptx[back_edge.end():]


def assembles_without_spills(kernel):
    if ptxas.find_ptxas() is None:
        pytest.skip("ptxas not found: PTX not assembled")
    assert kernel.metadata["spill_stores"] == 0 and kernel.metadata["spill_loads"] == 0


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
@pytest.mark.parametrize("size", [512, 8000])  # 8000: C's rows and columns masked
def test_sm90_epilogue_stmatrix_and_predicated_stores(shape, size):
    block_m, block_n, _, num_warps, _ = shape
    kernel = compile_matmul(shape, size)
    ptx = kernel.asm["ptx"]
    tail = epilogue(ptx)
    per_thread = block_m * block_n // (32 * num_warps)  # f16 elements of C per thread
    # 8 elements (four 32-bit words) per stmatrix.x4 and per st.global.v4.
    assert len(re.findall(r"stmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16", tail)) \
        == per_thread // 8
    assert "st.shared" not in tail
    stores = re.findall(r"(@%p\d+ )?st\.global\.v4\.b32", tail)
    assert len(stores) == per_thread // 8 and all(stores)  # every one predicated
    assert not re.search(r"\bbra\b", tail[tail.index("stmatrix"):])  # straight-line stores
    assert "fence.proxy.async" not in ptx
    assembles_without_spills(kernel)


def test_sm90_ragged_c_stores_single_elements_predicated():
    # 333 is not a multiple of 16: C's rows are not 16-byte aligned, one f16 per store. (With
    # 128 or more C elements per thread, 128x128 w4 and 128x256 w8, such kernels spill, before
    # this change too, and Triton 3.6's: docs/perf/matmul_sass.md.)
    kernel = compile_matmul((128, 128, 64, 8, 3), 333)
    tail = epilogue(kernel.asm["ptx"])
    stores = re.findall(r"(@%p\d+ )?st\.global\.b16 \[%rd\d+\], %rs\d+;", tail)
    assert stores and all(stores)
    assert "stmatrix" in tail
    assembles_without_spills(kernel)


def test_bf16_epilogue_uses_stmatrix():
    kernel = compile_matmul((128, 128, 64, 4, 3), 512, dtype=ml_dtypes.bfloat16)
    assert len(re.findall(r"stmatrix\.sync\.aligned\.m8n8\.x4", kernel.asm["ptx"])) == 16
    assembles_without_spills(kernel)


def test_sm80_keeps_st_shared():
    kernel = compile_matmul((128, 128, 32, 4, 4), 512, arch="sm_80")
    tail = epilogue(kernel.asm["ptx"])
    assert "stmatrix" not in kernel.asm["ptx"] and "st.shared" in tail
    assert all(re.findall(r"(@%p\d+ )?st\.global\.v4\.b32", tail))
    assembles_without_spills(kernel)
