"""The specialization for tensors past 2**31 elements, without a GPU: every tutorial and
tessera.ops kernel (the first cases of scripts/check_ptx_identical.py) with every array
argument addressing 2**31 elements or more compiles for sm_90a and sm_80 through ptxas, with
every pointer offset in int64 (widen_offsets) and no more register spills than its small
specialization; and its tgir, run by the interpreter, computes bit for bit what the small
specialization's does. (That the small specializations' PTX did not change is
scripts/check_ptx_identical.py's --compare.)
"""
import os
import re
import sys

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import check_ptx_identical  # noqa: E402  (scripts/)
from tessera.compiler import ptxas  # noqa: E402
from tessera.errors import OutOfResources  # noqa: E402



def offset_type(line: str) -> str:
    """The offset's type of an addptr line of the IR text ("" for other lines)."""
    if "= addptr " not in line:
        return ""
    types = line.split(" : (", 1)[1]
    depth = 0
    for i, char in enumerate(types):
        depth += char == "<"
        depth -= char == ">"
        if char == "," and depth == 0:
            return types[i + 1:].split(")", 1)[0].strip()
    return ""


def large_view(x: np.ndarray) -> np.ndarray:
    """A view of x's first element whose extent passes 2**31 elements (two elements 2**31
    apart), never read: compiling only looks at its dtype, address and extent."""
    return as_strided(x, (2,), (2 ** 31 * x.itemsize,))


def first_cases(group: str, module, cases, arch: str, count: int):
    found = []
    for case in cases(module, arch, True):
        found.append(case)
        if len(found) == count:
            break
    return found


def all_groups():
    return [(group, module, cases) for group, module, cases in check_ptx_identical.sources(True)
            if "masked" not in group and "descriptor" not in group]


GROUPS = all_groups()


@pytest.mark.parametrize("arch", check_ptx_identical.ARCHS)
@pytest.mark.parametrize("index", range(len(GROUPS)), ids=[g[0] for g in GROUPS])
def test_large_specialization_compiles_with_int64_offsets(index, arch):
    group, module, cases = GROUPS[index]
    for label, kernel, args, meta in first_cases(group, module, cases, arch, 1):
        large = tuple(large_view(a) if isinstance(a, np.ndarray) else a for a in args)
        try:
            small = kernel.compile(*args, arch=arch, **meta)
        except OutOfResources:
            continue
        widened = kernel.compile(*large, arch=arch, **meta)
        tir = widened.asm["tir"]
        assert "large_tensors" in tir, label
        offsets = [offset_type(line) for line in tir.splitlines() if offset_type(line)]
        assert offsets and all(re.search(r"\bi64>?$|xi64>$", t) for t in offsets), \
            (label, [t for t in offsets if "i64" not in t][:3])
        if ptxas.find_ptxas():
            assert widened.n_spills <= small.n_spills + 8, (label, small.n_spills,
                                                            widened.n_spills)


def random_like(x: np.ndarray, rng) -> np.ndarray:
    if x.dtype.kind == "f" or x.dtype.name == "bfloat16":
        return rng.standard_normal(x.shape).astype(x.dtype)
    return rng.integers(0, 2, x.shape).astype(x.dtype)


@pytest.mark.parametrize("index", range(len(GROUPS)), ids=[g[0] for g in GROUPS])
def test_large_specialization_computes_what_the_small_one_does(index):
    """The sm_90a tgir (cp.async rings, wgmma) of both specializations, run by the interpreter
    on the same random inputs over a 2 x 2 grid: widening changes addresses' arithmetic only,
    so every output is bit for bit the same."""
    from tessera import interpreter
    from tessera._tessera import ir
    group, module, cases = GROUPS[index]
    label, kernel, args, meta = first_cases(group, module, cases, "sm_90a", 1)[0]
    rng = np.random.default_rng(index)
    inputs = [random_like(a, rng) if isinstance(a, np.ndarray) else a for a in args]
    large = tuple(large_view(a) if isinstance(a, np.ndarray) else a for a in args)
    outputs = []
    for specialization in (args, large):
        compiled = kernel.compile(*specialization, arch="sm_90a", **meta)
        arrays = [x.copy() if isinstance(x, np.ndarray) else x for x in inputs]
        interpreter.run(ir.parse_module(compiled.asm["tgir"]), (2, 2), arrays)
        outputs.append([x for x in arrays if isinstance(x, np.ndarray)])
    for small, widened in zip(*outputs):
        np.testing.assert_array_equal(small, widened, err_msg=label)
    before = [x for x in inputs if isinstance(x, np.ndarray)]
    assert any(not np.array_equal(x, y, equal_nan=True) for x, y in zip(before, outputs[1])), \
        f"{label}: the kernel wrote nothing"


@pytest.mark.parametrize("arch", check_ptx_identical.ARCHS)
def test_int64_offsets_show_in_the_ptx(arch):
    """tessera.ops.matmul's kernel (Triton's tutorial kernel, int32 offsets as written): the
    row offsets of a large A or C are 64-bit multiplies in the PTX; the small specialization
    has none (its offsets stay 32-bit, mul.wide.s32 scaling them to bytes)."""
    from tessera.ops import gemm
    a = np.zeros((512, 512), np.float16)
    meta = dict(gemm.CONFIGS[0].kwargs, num_warps=4, num_stages=3, HAS_BIAS=False,
                ACTIVATION="")
    sizes = (512, 512, 512, 512, 1, 512, 1, 512, 1)
    small = gemm.matmul_kernel.compile(a, a, a, a, *sizes, arch=arch, **meta).asm["ptx"]
    assert "mul.lo.s64" not in small and "mul.wide.s32" in small
    for args in ((large_view(a), a, a, a), (a, a, large_view(a), a)):
        ptx = gemm.matmul_kernel.compile(*args, *sizes, arch=arch, **meta).asm["ptx"]
        assert "mul.lo.s64" in ptx
