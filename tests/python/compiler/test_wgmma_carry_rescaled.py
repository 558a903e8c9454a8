"""TESSERA_WGMMA_CARRY_RESCALED (knobs.wgmma_carry_rescaled, with wgmma_pipeline): a loop's
product that the next step reads otherwise than as a wgmma accumulator (the attention
forward's rescale, acc * alpha) stays in flight across the back edge, retired by the wait
before that reader; the step's copies go after its last product, into the slot whose products
that wait retired (Triton's loop: docs/perf/triton_parity.md). Checked here on the CPU: the
loop's events on both ring kinds, ptxas without spills or serialized wgmma (C7514), no write
into a slot an in-flight product reads (test_wgmma_hazards), the compiled IR in the
interpreter against float64, and kernels without such a product unchanged."""
import re

import numpy as np
import pytest
import tessera.ops.flash_attention as fa
from tessera.config import knobs
from test_attention_ptx import compile_attention
from test_attention_tma import compile_tma
from test_wgmma_pipeline_ptx import (TMA_EVENTS, assert_no_hazard, assert_no_spills,
                                     attention_in_interpreter, events, loops)


def tma_steps(body: str) -> list:
    steps = [m.group(0).replace(".sync.aligned ", " ") for m in re.finditer(TMA_EVENTS, body)]
    return [e for i, e in enumerate(steps) if i == 0 or e != steps[i - 1]]


def test_the_knob_is_part_of_the_cache_key_and_off_by_default():
    from tessera.launch_options import CODE_KNOBS
    assert "wgmma_carry_rescaled" in CODE_KNOBS and knobs.wgmma_carry_rescaled is False


@pytest.mark.parametrize("D", [64, 128])
def test_cp_async_forward_keeps_p_v_in_flight_across_the_back_edge(D):
    x = np.zeros((1, 2, 1024, D), np.float16)
    for config in fa.candidates("fwd", x, "sm_90a"):
        for causal in (False, True):
            with knobs.scope(wgmma_carry_rescaled=True):
                kernel, _ = compile_attention("fwd", D, "fp16", causal, "sm_90a", config=config)
            for body, after in loops(kernel.asm["ptx"]):
                # Q Kᵀ, the wait that retires it and the previous P V, the softmax, P V left
                # in flight, the barrier, then the copies: no wait before the back edge.
                steps = [e for e in events(body) if e != "ex2"]
                assert steps[0].startswith("cp.wait") and steps[1:] == [
                    "bar", "mma", "commit", "wait 0", "mma", "commit", "bar", "cp",
                    "cp.commit"], (config, causal, steps)
                assert events(after)[0] == "wait 0"
            assert_no_hazard(kernel.asm["tgir"])
            assert_no_spills(kernel)


@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_tma_forward_releases_the_previous_slot_after_the_last_product(D, causal):
    with knobs.scope(wgmma_carry_rescaled=True):
        kernel = compile_tma(D, "fp16", causal, (128, 128, 8, 2))
    for body, after in loops(kernel.asm["ptx"]):
        assert tma_steps(body) == [
            "mbarrier.try_wait", "wgmma.commit_group", "wgmma.wait_group 0",
            "wgmma.commit_group", "mbarrier.arrive", "mbarrier.try_wait",
            "mbarrier.arrive.expect_tx", "cp.async.bulk.tensor"], tma_steps(body)
        assert "wgmma.wait_group.sync.aligned 0" in after
    assert_no_hazard(kernel.asm["tgir"])
    assert_no_spills(kernel)


def test_without_the_knob_the_forward_waits_at_the_back_edge():
    kernel = compile_tma(128, "fp16", False, (128, 128, 8, 2))
    for body, _ in loops(kernel.asm["ptx"]):
        assert tma_steps(body)[-2:] == ["wgmma.wait_group 0", "mbarrier.arrive"]


@pytest.mark.parametrize("name", ["dkdv", "dq"])
def test_chained_products_are_unchanged(name):
    # The backward's products are chained accumulators only: the same code either way.
    ptx = {}
    for carry in (False, True):
        with knobs.scope(wgmma_carry_rescaled=carry):
            ptx[carry] = compile_attention(name, 64, "fp16", True, "sm_90a")[0].asm["ptx"]
    assert ptx[True] == ptx[False]


@pytest.mark.parametrize("causal", [False, True])
def test_compiled_forward_runs_in_the_interpreter(causal):
    with knobs.scope(wgmma_pipeline=True, wgmma_carry_rescaled=True):
        attention_in_interpreter(causal, "sm_90a", 64)
