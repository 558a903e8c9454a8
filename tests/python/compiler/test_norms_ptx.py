"""tessera.ops' softmax and RMSNorm / LayerNorm kernels compile for sm_80
and sm_90a with the configs their wrappers launch, use 16-byte accesses where rows are
aligned, and ptxas assembles them with zero spills (where ptxas is installed)."""
import re

import ml_dtypes
import numpy as np
import pytest

from tessera.compiler import ptxas
from tessera.ops import fused_softmax as softmax
from tessera.ops import norms

DTYPES = {"fp32": np.float32, "bf16": ml_dtypes.bfloat16}


def check_resources(stages, arch, aligned: bool):
    if aligned:  # 16-byte global reads: plain loads, or copies into a cp.async ring
        ptx = stages["ptx"]
        assert "ld.global.v4.b32" in ptx or re.search(
            r"cp\.async\.cg\.shared\.global \[[^]]+\], \[[^]]+\], 16", ptx)
    if ptxas.find_ptxas() is None:
        pytest.skip("ptxas not installed: PTX not assembled")
    report = ptxas.assemble(stages["ptx"], arch).report
    assert report["spill_stores"] == 0 and report["spill_loads"] == 0, report


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("n_cols", [128, 1000, 4096, 32768])
def test_softmax_kernel(n_cols, dtype, arch):
    x = np.zeros((8, n_cols), DTYPES[dtype])
    stages = softmax.softmax_kernel.asm(x, x, n_cols, n_cols, 8, n_cols,
                                        **softmax.softmax_config(n_cols), arch=arch)
    check_resources(stages, arch, aligned=n_cols % 16 == 0)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("n_cols", [128, 512, 1000])
@pytest.mark.parametrize("kernel", ["rms_fwd", "rms_bwd", "ln_fwd", "ln_bwd"])
def test_norm_kernels(kernel, n_cols, dtype, arch):
    x = np.zeros((64, n_cols), DTYPES[dtype])
    w = np.zeros(n_cols, DTYPES[dtype])
    partials = np.zeros((8, n_cols), np.float32)
    forward = norms.tile_config(n_cols)  # the configs the wrappers launch (rings included)
    calls = {
        "rms_fwd": (norms.rms_norm_fwd, (x, w, x, 64, n_cols, 1e-6), forward),
        "rms_bwd": (norms.rms_norm_bwd, (x, x, w, x, partials, 64, n_cols, 1e-6),
                    norms.backward_config(n_cols, reductions_per_row=2)),
        "ln_fwd": (norms.layer_norm_fwd, (x, w, w, x, 64, n_cols, 1e-5), forward),
        "ln_bwd": (norms.layer_norm_bwd, (x, x, w, x, partials, partials, 64, n_cols, 1e-5),
                   norms.backward_config(n_cols, reductions_per_row=4)),
    }
    function, args, config = calls[kernel]
    stages = function.asm(*args, **config, arch=arch)
    check_resources(stages, arch, aligned=n_cols % 16 == 0)


def test_sum_partials():
    partials = np.zeros((1056, 512), np.float32)
    stages = norms.sum_partials.asm(partials, partials, 1056, 512, BLOCK_ROWS=32, BLOCK_COLS=64,
                                    arch="sm_90a")
    check_resources(stages, "sm_90a", aligned=True)
