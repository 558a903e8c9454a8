"""A pipelined loop's wgmma product in flight across iterations (knobs.wgmma_pipeline, sm_90a;
docs/perf/wgmma_across_iterations.md), without a GPU.

Each step of a cp.async-pipelined loop then waits for the copies of its slot and
synchronizes, issues its product, waits for the previous step's product only
(`wgmma.wait_group 1`), synchronizes again (the copies overwrite the slot that product read),
issues the next copies and goes round with its product in flight: no `wait_group 0` inside
the loop, one after it. Checked on every config of tessera.ops.matmul, the attention
backward (dQ and dK/dV, whose register A words stay live across the back edge) and TMA
rings; the attention forward keeps its order (its accumulator is rescaled at every step).
ptxas assembles them without spills or serialized wgmma; the compiled IR runs in the
interpreter against float64 on ragged shapes; an independent check finds no write to bytes
an in-flight product reads; sm_80 code does not change."""
import re

import numpy as np
import pytest
from tessera import interpreter
from tessera._tessera import ir, passes
from tessera.compiler import ptxas
from tessera.config import knobs
from tessera.ops import gemm

import tessera.ops.flash_attention as fa
from test_attention_masked_ptx import arguments as masked_arguments
from test_attention_masked_ptx import case as masked_case
from test_attention_masked_ptx import compile_masked
from tessera.ops.masked_attention import KEYS
from test_attention_masked_ptx import \
    test_compiled_ir_runs_in_the_interpreter as masked_attention_in_interpreter
from test_attention_ptx import compile_attention
from test_attention_ptx import test_compiled_ir_runs_in_the_interpreter as attention_in_interpreter
from test_tma_ptx import compile_matmul as compile_descriptor_matmul
from test_tma_ptx import dm
from test_tma_ptx import test_tma_pipeline_runs_in_the_interpreter as tma_in_interpreter
from test_wgmma_ptx import CONFIG_IDS, CONFIGS, compile_config, relative_error

EVENTS = (r"wgmma\.commit_group|wgmma\.wait_group\.sync\.aligned (\d+)|bar\.sync|"
          r"cp\.async\.wait_group\s+(\d+)|cp\.async\.commit_group|cp\.async\.cg|"
          r"wgmma\.mma_async|ex2\.approx")


def events(ptx: str) -> list:
    """The synchronization events of `ptx` in order, runs of one kind collapsed."""
    found = []
    for match in re.finditer(EVENTS, ptx):
        text = match.group(0)
        event = (f"wait {match.group(1)}" if match.group(1) is not None
                 else f"cp.wait {match.group(2)}" if match.group(2) is not None
                 else {"wgmma.commit_group": "commit", "bar.sync": "bar",
                       "cp.async.commit_group": "cp.commit", "cp.async.cg": "cp",
                       "wgmma.mma_async": "mma", "ex2.approx": "ex2"}[text])
        if not found or found[-1] != event or event in ("commit", "bar"):
            found.append(event)
    return found


def loops(ptx: str) -> list:
    """The bodies of the loops of `ptx` that run wgmma: from a label to the branch back to it
    (LLVM rotates loops: the condition is at the bottom), and the code after that branch."""
    bodies = []
    for label in re.finditer(r"^(\$L__BB\d+_\d+):$", ptx, re.MULTILINE):
        back = re.search(rf"bra(\.uni)?\s+{re.escape(label.group(1))};", ptx[label.end():])
        body = ptx[label.end():label.end() + back.start()] if back else ""
        if "wgmma.mma_async" in body:
            bodies.append((body, ptx[label.end() + back.end():]))
    return bodies


def assert_no_hazard(tgir: str):
    """No shared-memory write of the compiled IR may overwrite what a wgmma group not yet
    waited for by a barrier reads (test_wgmma_hazards: loops run with concrete ring slots,
    independently of membar's analysis); the pass fails naming the write and the product."""
    passes.run(ir.parse_module(tgir), ["test_wgmma_hazards"])


def compile_matmul(config, pipeline: bool, arch="sm_90a", **kwargs):
    with knobs.scope(wgmma_pipeline=pipeline):
        return compile_config(gemm.matmul_kernel, config, arch=arch, **kwargs)


def assert_no_spills(kernel):
    """ptxas assembles it without spills and without serializing its wgmma instructions
    (C7514: an instruction reading a product's registers while ptxas sees it in flight)."""
    if ptxas.find_ptxas() is None:
        return
    assert kernel.metadata["spill_stores"] == 0 and kernel.metadata["spill_loads"] == 0
    log = ptxas.assemble(kernel.asm["ptx"], "sm_90a").log
    assert "Potential Performance Loss" not in log, log


@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
def test_matmul_keeps_one_product_in_flight(config):
    kernel = compile_matmul(config, True)
    (body, after), = loops(kernel.asm["ptx"])
    # The copies of the step's slot, the product, the previous product's wait, the second
    # barrier, the copies into that product's slot; the back edge waits for nothing.
    assert events(body) == [f"cp.wait {config.num_stages - 2}", "bar", "mma", "commit", "wait 1",
                            "bar", "cp", "cp.commit"]
    # The loop exit waits for the last product before the epilogue reads it.
    assert events(after)[0] == "wait 0"
    assert_no_spills(kernel)


def test_without_the_knob_every_step_drains():
    kernel = compile_matmul(CONFIGS[6], False)
    (body, _), = loops(kernel.asm["ptx"])
    assert events(body) == ["cp.wait 1", "bar", "cp", "cp.commit", "mma", "commit", "wait 0"]


@pytest.mark.parametrize("D", [64, 128])
def test_attention_forward_keeps_its_order(D):
    # Its accumulator is rescaled at every step (acc * alpha), not only chained into the next
    # P V: carried in flight across the back edge, that read made ptxas serialize every wgmma
    # of the kernel (C7514). So the loops keep their order and back-edge wait with the knob.
    events_by_knob = {}
    for pipeline in (False, True):
        with knobs.scope(wgmma_pipeline=pipeline):
            kernel, _ = compile_attention("fwd", D, "fp16", False, "sm_90a")
        events_by_knob[pipeline] = [events(body) for body, _ in loops(kernel.asm["ptx"])]
        assert_no_spills(kernel)
    assert events_by_knob[True] == events_by_knob[False]
    assert all(steps[-1] == "wait 0" for steps in events_by_knob[True])


@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("name", ["dkdv", "dq"])
def test_attention_backward_keeps_its_last_product_in_flight(name, D):
    # dK, dV and dQ are chained accumulators: the step's last product goes round in flight;
    # the first waits for the previous step's (wait 1), then the copies go behind a barrier.
    # dK/dV's first product starts from -lse: before it, the wgmma order mark (wait_group
    # N = the 2 products in flight: no stall, test_wgmma_order_mark.py).
    with knobs.scope(wgmma_pipeline=True):
        kernel, _ = compile_attention(name, D, "fp16", False, "sm_90a")
    steps = events(loops(kernel.asm["ptx"])[-1][0])  # the unmasked loop
    mark = ["wait 2"] if name == "dkdv" else []
    assert steps[:8 + len(mark)] == ["cp.wait 0", "bar", *mark, "mma", "commit", "wait 1",
                                     "bar", "cp", "cp.commit"], steps
    assert steps[-2:] == ["mma", "commit"], steps
    assert_no_spills(kernel)


@pytest.mark.parametrize("index", [0, 6, 7], ids=[CONFIG_IDS[i] for i in (0, 6, 7)])
def test_pipelined_ir_runs_exactly_in_the_interpreter(index):
    # M, N, K multiples of 16 (the specialization) but not of the blocks.
    config = CONFIGS[index]
    tgir = compile_matmul(config, True, size=256).asm["tgir"]
    assert re.search(r"barrier \{wgmma_pending = 1\}", tgir)
    rng = np.random.default_rng(index + 5)
    m, n, k = 208, 144, 112
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    bias = rng.standard_normal(n).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    bm, bn = config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"]
    interpreter.run(ir.parse_module(tgir), grid=(-(-m // bm) * -(-n // bn),),
                    args=[a, b, c, bias, m, n, k, k, 1, n, 1, n, 1])
    ref = a.astype(np.float64) @ b.astype(np.float64) + bias.astype(np.float64)
    assert relative_error(c, np.where(ref >= 0, ref, 0.01 * ref)) < 1e-3


def test_a_tile_staged_at_every_step_keeps_the_old_order():
    # K = 1000: A's rows are not 16-byte aligned, so A is staged through a buffer of its own
    # at every step (B keeps its ring). Restaging it must wait for the previous step's
    # product, which reads it, so no product could stay in flight: the loop keeps the
    # copies-first order and its back-edge wait (without, configs 6 and 7 spilled).
    config = CONFIGS[6]
    bm, bn = config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"]
    a, b = np.zeros((512, 1000), np.float16), np.zeros((1000, 512), np.float16)
    kernels = {}
    for pipeline in (False, True):
        with knobs.scope(wgmma_pipeline=pipeline):
            kernels[pipeline] = gemm.matmul_kernel.compile(
                a, b, b, b, 512, 512, 1000, 1000, 1, 512, 1, 512, 1, HAS_BIAS=False,
                ACTIVATION="", arch="sm_90a", num_warps=config.num_warps,
                num_stages=config.num_stages, **config.kwargs)
    (body, _), = loops(kernels[True].asm["ptx"])
    (old_body, _), = loops(kernels[False].asm["ptx"])
    assert events(body) == events(old_body)
    assert "wait 0" in events(body) and "wait 1" not in events(body)
    rng = np.random.default_rng(17)
    m, n, k = 208, 144, 100  # K neither a multiple of BLOCK_K nor of 16
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    interpreter.run(ir.parse_module(kernels[True].asm["tgir"]), grid=(-(-m // bm) * -(-n // bn),),
                    args=[a, b, c, c, m, n, k, k, 1, n, 1, n, 1])
    assert relative_error(c, a.astype(np.float64) @ b.astype(np.float64)) < 1e-3
    assert_no_spills(kernels[True])


@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_ir_runs_in_the_interpreter(causal, D):
    # Forward, dK/dV and dQ compiled with the knob, run against float64 at S = 80.
    with knobs.scope(wgmma_pipeline=True):
        attention_in_interpreter(causal, "sm_90a", D)


@pytest.mark.parametrize("name", ["fwd", "dkdv", "dq"])
def test_sm80_code_does_not_change(name):
    ptx = {}
    for pipeline in (False, True):
        with knobs.scope(wgmma_pipeline=pipeline):
            ptx[pipeline] = compile_attention(name, 64, "fp16", True, "sm_80")[0].asm["ptx"]
    assert ptx[True] == ptx[False]
    assert (compile_matmul(CONFIGS[1], True, arch="sm_80").asm["ptx"] ==
            compile_matmul(CONFIGS[1], False, arch="sm_80").asm["ptx"])


@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("name", ["dkdv", "dq"])
def test_attention_backward_assembles_without_spills(name, D):
    # Several products per step, chained through registers, with the knob.
    with knobs.scope(wgmma_pipeline=True):
        kernel, _ = compile_attention(name, D, "bf16", True, "sm_90a")
    assert "wgmma.mma_async" in kernel.asm["ptx"]
    assert_no_spills(kernel)


@pytest.mark.parametrize("pipeline", [False, True])
@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
def test_matmul_writes_nothing_an_inflight_product_reads(config, pipeline):
    assert_no_hazard(compile_matmul(config, pipeline).asm["tgir"])


@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("name", ["fwd", "dkdv", "dq"])
def test_attention_writes_nothing_an_inflight_product_reads(name, D):
    # Every candidate the autotuner may pick on sm_90a, causal or not; without the knob too.
    x = np.zeros((1, 2, 1024, D), np.float16)
    for config in fa.candidates(name, x, "sm_90a"):
        for causal in (False, True):
            for pipeline in (False, True):
                with knobs.scope(wgmma_pipeline=pipeline):
                    kernel, _ = compile_attention(name, D, "fp16", causal, "sm_90a",
                                                  config=config)
                assert_no_hazard(kernel.asm["tgir"])


@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("name", ["fwd", "dkdv", "dq"])
def test_masked_attention_writes_nothing_an_inflight_product_reads(name, D):
    q, k, v, do, mask, bias = masked_case(np.random.default_rng(D), 256, D)
    lse = np.zeros(q.shape[:3], np.float32)
    dbias = np.zeros(bias.shape, np.float32)
    args = masked_arguments(name, q, k, v, q, lse, lse, do, (q, q, q), mask, bias, dbias, True,
                            0.1)
    with knobs.scope(wgmma_pipeline=True):
        kernel, _ = compile_masked(name, args, D, True, "sm_90a", dbias_mode=2,
                                   bias_kind=KEYS.value)  # its bias is (1, H, 1, S)
    assert_no_hazard(kernel.asm["tgir"])
    assert_no_spills(kernel)


def test_masked_attention_ir_runs_in_the_interpreter():
    with knobs.scope(wgmma_pipeline=True):
        masked_attention_in_interpreter("sm_90a", 128)


TMA_EVENTS = (r"mbarrier\.try_wait|mbarrier\.arrive(\.expect_tx)?|cp\.async\.bulk\.tensor|"
              r"bar\.sync|wgmma\.wait_group\.sync\.aligned \d|wgmma\.commit_group")


@pytest.mark.parametrize("meta", dm.CONFIGS, ids=dm.CONFIG_IDS)
def test_tma_ring_keeps_one_product_in_flight(meta):
    # TMA rings (TESSERA_TMA): the slot's mbarrier wait, the product, the previous product's
    # wait, then each warp releases that product's slot (its "empty" mbarrier), the issuing
    # thread waits for the release, arms the slot (expect_tx) and copies: no bar.sync in the
    # step; nothing waited at the back edge.
    with knobs.scope(wgmma_pipeline=True):
        kernel = compile_descriptor_matmul(meta)
    (body, after), = loops(kernel.asm["ptx"])
    steps = [m.group(0).replace(".sync.aligned ", " ") for m in re.finditer(TMA_EVENTS, body)]
    collapsed = [e for i, e in enumerate(steps) if i == 0 or e != steps[i - 1]]
    assert collapsed == ["mbarrier.try_wait", "wgmma.commit_group", "wgmma.wait_group 1",
                         "mbarrier.arrive", "mbarrier.try_wait", "mbarrier.arrive.expect_tx",
                         "cp.async.bulk.tensor"], collapsed
    assert "wgmma.wait_group.sync.aligned 0" in after
    assert_no_hazard(kernel.asm["tgir"])
    assert_no_spills(kernel)


@pytest.mark.parametrize("ragged", [False, True], ids=["div16", "ragged"])
def test_tma_pipeline_runs_in_the_interpreter(ragged):
    # The interpreter checks the mbarrier protocol too (phases, expected bytes).
    with knobs.scope(wgmma_pipeline=True):
        for meta in dm.CONFIGS:
            tma_in_interpreter(meta, ragged)

