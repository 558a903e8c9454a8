"""tensor_descriptor.gather / .scatter through every stage for sm_80 and sm_90a, on the CPU:
the PTX assembles with ptxas without spills, and rows are read and written as 16-byte vectors
(each gathered row is contiguous)."""
import re

import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.compiler import ptxas

VECTOR_LOAD = re.compile(r"ld\.global(\.\w+)*\.v4\.")
VECTOR_STORE = re.compile(r"st\.global(\.\w+)*\.v4\.")


@tessera.jit
def gather_scatter_kernel(out_ptr, in_ptr, idx_ptr, y, X, Y, BX: tl.constexpr, BY: tl.constexpr):
    idx = tl.load(idx_ptr + tl.arange(0, BX))
    src = tl.make_tensor_descriptor(in_ptr, [X, Y], [Y, 1], [1, BY])
    dst = tl.make_tensor_descriptor(out_ptr, [X, Y], [Y, 1], [1, BY])
    dst.scatter(src.gather(idx, y), idx, y)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_gather_scatter_compile_and_assemble(arch):
    x = np.zeros((64, 128), np.float32)
    idx = np.zeros(32, np.int32)
    ptx = gather_scatter_kernel.asm(x, x, idx, 0, 64, 128, BX=32, BY=64, arch=arch)["ptx"]
    assert VECTOR_LOAD.search(ptx) and VECTOR_STORE.search(ptx)
    if ptxas.find_ptxas() is not None:
        assert ptxas.assemble(ptx, arch).report["spill_stores"] == 0
