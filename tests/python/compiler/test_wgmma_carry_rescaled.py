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


def test_the_knob_is_part_of_the_cache_key_and_on_by_default():
    from tessera.launch_options import CODE_KNOBS
    assert "wgmma_carry_rescaled" in CODE_KNOBS and knobs.wgmma_carry_rescaled is True


THREE_STAGES = {64: (128, 64, 8, 3), 128: (128, 64, 8, 3)}


def either_way(make):
    """make() with the knob off and on: {False: ..., True: ...}."""
    made = {}
    for carry in (False, True):
        with knobs.scope(wgmma_carry_rescaled=carry):
            made[carry] = make()
    return made


@pytest.mark.parametrize("D", [64, 128])
def test_cp_async_forward_keeps_p_v_in_flight_across_the_back_edge(D):
    # Three-slot rings and deeper (the copies, issued after the last product, still lead the
    # reads by a step): every candidate of that depth, and one per head dim.
    x = np.zeros((1, 2, 1024, D), np.float16)
    configs = {c for c in fa.candidates("fwd", x, "sm_90a") if c[3] >= 3} | {THREE_STAGES[D]}
    for config in sorted(configs):
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
def test_two_slot_rings_keep_the_wait_at_the_back_edge(D):
    # Copies after the last product would lead a two-slot ring's reads by no step at all
    # (each step waiting for its own tiles): the same code as without the knob.
    x = np.zeros((1, 2, 1024, D), np.float16)
    for config in (c for c in fa.candidates("fwd", x, "sm_90a") if c[3] == 2):
        ptx = either_way(lambda: compile_attention("fwd", D, "fp16", True, "sm_90a",
                                                   config=config)[0].asm["ptx"])
        assert ptx[True] == ptx[False], config
    with knobs.scope(wgmma_carry_rescaled=True):
        kernel = compile_tma(D, "fp16", False, (128, 128, 8, 2))
    for body, _ in loops(kernel.asm["ptx"]):
        assert tma_steps(body)[-2:] == ["wgmma.wait_group 0", "mbarrier.arrive"]


@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_tma_forward_releases_the_previous_slot_after_the_last_product(D, causal):
    with knobs.scope(wgmma_carry_rescaled=True):
        kernel = compile_tma(D, "fp16", causal, THREE_STAGES[D])
    for body, after in loops(kernel.asm["ptx"]):
        assert tma_steps(body) == [
            "mbarrier.try_wait", "wgmma.commit_group", "wgmma.wait_group 0",
            "wgmma.commit_group", "mbarrier.arrive", "mbarrier.try_wait",
            "mbarrier.arrive.expect_tx", "cp.async.bulk.tensor"], tma_steps(body)
        assert "wgmma.wait_group.sync.aligned 0" in after
    assert_no_hazard(kernel.asm["tgir"])
    assert_no_spills(kernel)


def test_without_the_knob_the_forward_waits_at_the_back_edge():
    with knobs.scope(wgmma_carry_rescaled=False):
        kernel = compile_tma(128, "fp16", False, THREE_STAGES[128])
    for body, _ in loops(kernel.asm["ptx"]):
        assert tma_steps(body)[-2:] == ["wgmma.wait_group 0", "mbarrier.arrive"]


@pytest.mark.parametrize("name", ["dkdv", "dq"])
def test_chained_products_are_unchanged(name):
    # The backward's products are chained accumulators only: the same code either way.
    ptx = either_way(lambda: compile_attention(name, 64, "fp16", True, "sm_90a")[0].asm["ptx"])
    assert ptx[True] == ptx[False]


@pytest.mark.parametrize("causal", [False, True])
def test_compiled_forward_runs_in_the_interpreter(causal):
    with knobs.scope(wgmma_pipeline=True, wgmma_carry_rescaled=True):
        attention_in_interpreter(causal, "sm_90a", 64)


@pytest.mark.parametrize("causal", [False, True])
def test_a_product_reading_the_loops_carried_p_is_retired_at_the_back_edge(causal):
    # OVERLAP's loop issues P V from the P of the step before (a carried value in registers):
    # carried across the back edge, the product would read registers the next step's P takes
    # (wrong on an H200 at three slots). Its pipelined loop is the code without the knob.
    from test_attention_schedules import compile_forward
    from test_attention_schedules import loops as ir_loops
    bodies = either_way(lambda: re.sub(r"%\d+", "%", ir_loops(compile_forward(
        128, THREE_STAGES[128], overlap=True, causal=causal).asm["tgir"])[-1]))
    assert "wgmma_carried" not in bodies[True] and bodies[True] == bodies[False]


def test_a_register_cap_keeps_the_wait_at_the_back_edge():
    # Under maxnreg (asked for occupancy) the carry's longer live ranges would spill (the
    # masked forward at D = 64 capped at 128: 4 bytes): the same code as without the knob.
    x = np.zeros((1, 2, 1024, 128), np.float16)
    lse = np.zeros((1, 2, 1024), np.float32)
    st = tuple(s // x.itemsize for s in x.strides[:3])
    bm, bn, warps, stages = THREE_STAGES[128]
    ptx = either_way(lambda: fa.attention_fwd_kernel.compile(
        x, x, x, x, lse, 0.1, 2, 1024, *st * 4, D=128, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=False,
        num_warps=warps, num_stages=stages, maxnreg=232, arch="sm_90a").asm["ptx"])
    assert ptx[True] == ptx[False]
