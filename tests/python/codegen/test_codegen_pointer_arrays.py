"""The compiled path of pointers read from memory: the grouped GEMM of the compatibility suite
(operand pointers loaded from int64 tables and cast with tl.pointer_type) and pointers stored
to / loaded from a pointer-to-pointer view, compiled to PTX for sm_80 and sm_90a and through
ptxas where installed (tests/gpu runs them; tests/python/interpreter checks their results)."""
import os
import re
import sys

import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.compiler import ptxas

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from compat import loader  # noqa: E402

CONFIGS = {"sm_80": dict(BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=32, NUM_SM=128,
                         num_warps=4, num_stages=3),
           "sm_90a": dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, NUM_SM=132,
                          num_warps=8, num_stages=3)}


def accesses(ptx: str):
    return re.findall(r"\b(?:ld|st)\.global[.a-z0-9]*", ptx)


@pytest.mark.parametrize("arch", sorted(CONFIGS))
def test_grouped_gemm_loads_its_operand_pointers_and_multiplies_on_tensor_cores(arch):
    kernel = loader.load_tessera("grouped_gemm").grouped_matmul_kernel.fn
    tables, sizes = torch.zeros(4, dtype=torch.int64), torch.zeros(12, dtype=torch.int32)
    asm = kernel.asm(tables, tables, tables, sizes, sizes, 4, arch=arch, **CONFIGS[arch])
    ptx = asm["ptx"]
    assert "inttoptr" in asm["tir"]
    # three pointers (a, b, c) read as 64-bit values, then the fp16 operands through them
    assert accesses(ptx).count("ld.global.b64") == 3
    assert "ld.global.b16" in accesses(ptx) and "st.global.b16" in accesses(ptx)
    assert ("wgmma.mma_async" if arch == "sm_90a" else "mma.sync.aligned") in ptx
    if ptxas.find_ptxas() is not None:
        assert "cubin" in asm


@tessera.jit
def gather_through_pointer_table(table_ptr, out_ptr, BLOCK: tl.constexpr):
    table = table_ptr.to(tl.pointer_type(tl.pointer_type(tl.float32)), bitcast=True)
    offs = tl.arange(0, BLOCK)
    pointers = tl.load(table + offs)
    tl.store(table + BLOCK + offs, pointers + 1)  # pointers stored back, moved one element
    tl.store(out_ptr + offs, tl.load(pointers))


@pytest.mark.parametrize("arch", sorted(CONFIGS))
def test_pointer_to_pointer_loads_and_stores_are_64_bit(arch):
    table, out = np.zeros(1024, np.int64), np.zeros(512, np.float32)
    asm = gather_through_pointer_table.asm(table, out, BLOCK=512, arch=arch)  # 4 per thread
    ops = set(accesses(asm["ptx"]))
    assert {"ld.global.v2.b64", "st.global.v2.b64"} <= ops, ops  # the table, vectorized
    assert "ld.global.b32" in ops  # each gathered float through its own pointer
    if ptxas.find_ptxas() is not None:
        assert "cubin" in asm
