"""TESSERA_PINGPONG (knobs.pingpong): in 8-warp sm_90a kernels the two warpgroups take turns at
issuing a loop's wgmma products (transforms/warpgroup_pingpong.cpp, lit
transforms/warpgroup_pingpong.ir). Here: the knob reaches the compiled kernel (named-barrier
turns in the PTX, balanced per loop, ptxas accepts them), it is part of the cache key, and
kernels it does not apply to (4 warps, sm_80, the knob off) are unchanged."""
import re

import numpy as np
import pytest
import tessera.ops.flash_attention as fa
from tessera.compiler import ptxas
from tessera.config import knobs
from tessera.launch_options import CODE_KNOBS
from tessera.ops.flash_attention.forward import head_descriptors


def compile_forward(config, arch="sm_90a", causal=True, D=128, S=1024, H=2, tma=True):
    x = np.zeros((1, H, S, D), np.float16)
    lse = np.zeros((1, H, S), np.float32)
    st = tuple(s // x.itemsize for s in x.strides[:3])
    bm, bn, warps, stages = config
    inputs = head_descriptors(x, x, x, block_m=bm, block_n=bn) if tma else (x, x, x)
    return fa.attention_fwd_kernel.compile(
        *inputs, x, lse, 0.125 * fa.LOG2E, H, S, *st * 4, D=D, BLOCK_M=bm, BLOCK_N=bn,
        CAUSAL=causal, RELOAD=False, TMA=tma, SPECIALIZE=False, num_warps=warps,
        num_stages=stages, arch=arch)


def turns(ptx: str) -> dict:
    return {"sync": len(re.findall(r"\bbar\.sync\s+%r", ptx)),
            "arrive": len(re.findall(r"\bbar\.arrive\s+%r", ptx)),
            "open": len(re.findall(r"@p bar\.arrive 2, 256", ptx)),
            "close": len(re.findall(r"@p bar\.sync 2, 256", ptx))}


def test_the_knob_is_part_of_the_cache_key_and_off_by_default():
    assert "pingpong" in CODE_KNOBS and knobs.pingpong is False


@pytest.mark.parametrize("config", [(128, 128, 8, 2), (128, 64, 8, 2)])
def test_eight_warp_loops_take_turns_at_their_products(config):
    plain = compile_forward(config)
    with knobs.scope(pingpong=True):
        kernel = compile_forward(config)
    ptx = kernel.asm["ptx"]
    assert turns(plain.asm["ptx"]) == {"sync": 0, "arrive": 0, "open": 0, "close": 0}
    found = turns(ptx)
    # Two loops (the causal diagonal, then the rest), two runs of products each (Q Kᵀ, then
    # P V after the softmax): a wait and a pass per run, an open and a close per loop.
    assert found == {"sync": 4, "arrive": 4, "open": 2, "close": 2}, found
    tgir = kernel.asm["tgir"]
    assert tgir.count('warpgroup_turn {turn = "wait"}') == 4
    assert "pingpong = 1" in tgir
    if ptxas.find_ptxas() is not None:
        assert kernel.metadata["spill_stores"] == 0


def test_kernels_the_turns_do_not_apply_to_are_unchanged():
    with knobs.scope(pingpong=True):
        four_warps = compile_forward((64, 128, 4, 2), D=64)
        sm80 = compile_forward((128, 64, 8, 2), arch="sm_80", tma=False)
    assert "warpgroup_turn" not in four_warps.asm["tgir"]
    assert "warpgroup_turn" not in sm80.asm["tgir"] and "pingpong" not in sm80.asm["tgir"]
    assert turns(four_warps.asm["ptx"])["arrive"] == 0
