"""Asynchronous wgmma (the wgmma_waits pass places `wgmma_wait` ops, codegen lowers them): a
dot's group is waited for at the first op that needs its result, with `wgmma.wait_group N`
leaving the N groups committed after it in flight, so independent work runs beside it on the
tensor cores. Barriers (membar's and those inside an op, e.g. a cross-warp reduction's) and
control flow wait for every group first; a dot accumulating into an in-flight result waits
for nothing. With
knobs.wgmma_overlap off each dot waits (N = 0) right after its commit.

The kernel reads its operands from the pipeliner's rings, as attention does: buffers live
through the loop, so no barrier comes between the products (a staged operand reusing a dead
buffer's bytes gets one from membar, and that barrier waits)."""
import re

import numpy as np
import pytest
import tessera
import tessera.language as tl
from tessera.config import knobs


@tessera.jit
def two_products(a_ptr, b_ptr, c_ptr, x_ptr, out_ptr, col_sums_ptr, K,
                 REDUCE: tl.constexpr, CHAIN: tl.constexpr):
    rows = tl.arange(0, 64)
    acc = tl.zeros((64, 64), tl.float32)
    for k in range(0, K, 64):
        a = tl.load(a_ptr + rows[:, None] * K + (k + rows)[None, :])
        b = tl.load(b_ptr + (k + rows)[:, None] * 64 + rows[None, :])
        c = tl.load(c_ptr + (k + rows)[:, None] * 64 + rows[None, :])
        first = tl.dot(a, b)
        second = tl.dot(a, c)
        if CHAIN:  # accumulates into the in-flight `second`
            second = tl.dot(a, b, second)
        if REDUCE:  # across warps, through shared memory, before any product is used
            x = tl.load(x_ptr + (k + rows)[:, None] * 64 + rows[None, :])
            tl.store(col_sums_ptr + k + rows, tl.sum(x, axis=1))
        acc += tl.exp2(first) * second
    tl.store(out_ptr + rows[:, None] * 64 + rows[None, :], acc)


def compile_two_products(overlap: bool, pipeline: bool, reduce: bool, chain: bool):
    """two_products compiled for sm_90a under the wgmma overlap/pipeline knobs given."""
    h = np.zeros((64, 128), np.float16)
    f = np.zeros((128, 64), np.float32)
    with knobs.scope(wgmma_overlap=overlap, wgmma_pipeline=pipeline):
        return two_products.compile(h, h, h, f, f, np.zeros(128, np.float32), 128,
                                    REDUCE=reduce, CHAIN=chain, num_warps=4, num_stages=2,
                                    arch="sm_90a")


def loop_events(overlap: bool, reduce: bool = False, chain: bool = False):
    """The loop body's wgmma commits, waits (with N), ex2 and bar.sync, in order, runs of one
    wait or ex2 collapsed (a wait ties at most 64 registers per statement; ex2 per element)."""
    # Products within one step (across steps with knobs.wgmma_pipeline: its own tests).
    ptx = compile_two_products(overlap, False, reduce, chain).asm["ptx"]
    body = ptx[ptx.index("wgmma.fence"):]  # from the first product on
    body = body[:body.index("bra.uni")] if "bra.uni" in body else body
    pattern = r"wgmma\.commit_group|wgmma\.wait_group\.sync\.aligned (\d+)|ex2\.approx|bar\.sync"
    events = []
    for match in re.finditer(pattern, body):
        text = match.group(0)
        event = (f"wait {match.group(1)}" if match.group(1) is not None
                 else "commit" if text.startswith("wgmma") else text.split(".")[0])
        if not events or events[-1] != event or event == "commit":
            events.append(event)
    return events


def test_each_product_is_waited_for_at_its_first_use():
    # exp2(first) needs only the older group: wait 1 keeps `second` in flight beside the
    # ex2s; the product needs `second`: wait 0.
    assert loop_events(True)[:5] == ["commit", "commit", "wait 1", "ex2", "wait 0"]


def test_without_overlap_every_dot_waits_at_once():
    assert loop_events(False)[:5] == ["commit", "wait 0", "commit", "wait 0", "ex2"]


def test_barriers_wait_for_every_group():
    events = loop_events(True, reduce=True)
    assert events[:4] == ["commit", "commit", "wait 0", "bar"], events  # the reduction's


def test_a_chained_accumulator_needs_no_wait():
    events = loop_events(True, chain=True)
    assert events[:5] == ["commit", "commit", "commit", "wait 2", "ex2"], events


# A wgmma_wait op, or the wait an op with its own barrier makes inside its lowering.
WAIT_IR = re.compile(r"wgmma_wait \{pending = (\d+)\}|inner_wgmma_wait = (\d+)")
WAIT_PTX = re.compile(r"wgmma\.wait_group\.sync\.aligned (\d+);")


@pytest.mark.parametrize("overlap, pipeline, reduce, chain", [
    (True, False, False, False), (False, False, False, False), (True, False, True, False),
    (True, False, False, True), (True, True, False, True)])
def test_the_ptx_waits_are_the_wgmma_wait_ops_of_the_ir(overlap, pipeline, reduce, chain):
    # The wgmma_waits pass decides; codegen emits one wait_group per wgmma_wait op (or
    # inner_wgmma_wait attribute: REDUCE's layout conversion has its own barrier), in order
    # and with its count, and none of its own (these kernels have no fp8 partial sums).
    compiled = compile_two_products(overlap, pipeline, reduce, chain)
    waits = [op or inner for op, inner in WAIT_IR.findall(compiled.asm["tgir"])]
    assert waits and WAIT_PTX.findall(compiled.asm["ptx"]) == waits


def test_interpreter_matches_float64(monkeypatch):
    # The kernel's meaning (the GPU test in tests/gpu/test_matmul.py runs the waits).
    monkeypatch.setenv("TESSERA_INTERPRET", "1")
    rng = np.random.default_rng()
    a = (rng.standard_normal((64, 128)) * 0.1).astype(np.float16)
    b, c = ((rng.standard_normal((128, 64)) * 0.1).astype(np.float16) for _ in range(2))
    x = rng.standard_normal((128, 64)).astype(np.float32)
    out, sums = np.full((64, 64), np.nan, np.float32), np.full(128, np.nan, np.float32)
    two_products[(1,)](a, b, c, x, out, sums, 128, REDUCE=True, CHAIN=True)
    a64, b64, c64 = (t.astype(np.float64) for t in (a, b, c))
    ref = sum(np.exp2(a64[:, k:k + 64] @ b64[k:k + 64])
              * (a64[:, k:k + 64] @ (c64[k:k + 64] + b64[k:k + 64])) for k in (0, 64))
    np.testing.assert_allclose(out, ref, rtol=2e-3, atol=1e-3)
    np.testing.assert_allclose(sums, x.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-4)


@tessera.jit
def delayed_products(q_ptr, k_ptr, v_ptr, out_ptr, N):
    """Σ_j exp2(S_j - rowmax S_j) V_j for S_j = Q K_jᵀ, each P_j V_j issued a step late, beside
    S_(j+1) (FlashAttention-3's order): P is carried in registers as the register A operand."""
    rows = tl.arange(0, 64)
    q = tl.load(q_ptr + rows[:, None] * 64 + rows[None, :])
    p = tl.zeros((64, 64), tl.float16)  # no block before the first: P V adds nothing
    acc = tl.zeros((64, 64), tl.float32)
    for n in range(0, N, 64):
        k = tl.load(k_ptr + (n + rows)[:, None] * 64 + rows[None, :])
        v = tl.load(v_ptr + (tl.maximum(n - 64, 0) + rows)[:, None] * 64 + rows[None, :])
        s = tl.dot(q, tl.trans(k))
        acc = tl.dot(p, v, acc)
        p = tl.exp2(s - tl.max(s, axis=1)[:, None]).to(tl.float16)
    v = tl.load(v_ptr + (N - 64 + rows)[:, None] * 64 + rows[None, :])
    tl.store(out_ptr + rows[:, None] * 64 + rows[None, :], tl.dot(p, v, acc))


def delayed_products_ptx(pipeline: bool = False) -> str:
    h = np.zeros((256, 64), np.float16)
    with knobs.scope(wgmma_pipeline=pipeline):
        return delayed_products.compile(h, h, h, np.zeros((64, 64), np.float32), 256,
                                        num_warps=4, num_stages=2, arch="sm_90a").asm["ptx"]


def test_a_row_reduction_runs_beside_the_previous_product():
    # The row max (shuffles, a reduce op: its combiner region is straight-line code) needs
    # only the scores: P V stays in flight through the max and the exp2s.
    ptx = delayed_products_ptx()
    loop = ptx[ptx.index("wgmma.fence"):]
    loop = loop[:loop.index("bra.uni")] if "bra.uni" in loop else loop
    pattern = r"wgmma\.commit_group|wgmma\.wait_group\.sync\.aligned (\d+)|shfl|ex2\.approx"
    events = []
    for match in re.finditer(pattern, loop):
        event = (f"wait {match.group(1)}" if match.group(1) is not None
                 else "commit" if match.group(0).startswith("wgmma") else match.group(0)[:4])
        if not events or events[-1] != event or event == "commit":
            events.append(event)
    assert events[:6] == ["commit", "commit", "wait 1", "shfl", "ex2.", "wait 0"], events


@pytest.mark.parametrize("pipeline", [False, True], ids=["drains", "in-flight"])
def test_register_operands_stay_unwritten_until_their_wait(pipeline):
    # PTX ISA (wgmma.mma_async): A's registers must not change before the wait for the group.
    # The loop's next P (a phi copy into the same register, once LLVM coalesces them) would,
    # unless the wait uses them. With knobs.wgmma_pipeline, P V stays in flight across the
    # back edge: its A words are carried (phis) to the wait in the next step.
    ptx = delayed_products_ptx(pipeline)
    for wgmma in re.finditer(r"wgmma\.mma_async[^{]*\{[^}]*\},\s*\{([^}]*)\}", ptx):
        a_registers = {r.strip() for r in wgmma.group(1).split(",")}
        rest = ptx[wgmma.end():]
        until_wait = rest[:rest.index("wgmma.wait_group")]
        for line in until_wait.splitlines():
            fields = line.strip().split(None, 1)
            if len(fields) == 2 and not fields[0].startswith(("//", "wgmma", "{", "}")):
                destination = fields[1].split(",")[0].strip()
                assert destination not in a_registers, line


def test_delayed_products_match_float64(monkeypatch):
    monkeypatch.setenv("TESSERA_INTERPRET", "1")
    rng = np.random.default_rng()
    q, k, v = ((rng.standard_normal((n, 64)) * 0.3).astype(np.float16) for n in (64, 256, 256))
    out = np.full((64, 64), np.nan, np.float32)
    delayed_products[(1,)](q, k, v, out, 256)
    q64, k64, v64 = (t.astype(np.float64) for t in (q, k, v))
    ref = 0
    for n in range(0, 256, 64):
        s = q64 @ k64[n:n + 64].T
        ref = ref + np.exp2(s - s.max(axis=1, keepdims=True)) @ v64[n:n + 64]
    np.testing.assert_allclose(out, ref, rtol=5e-3, atol=5e-3)
