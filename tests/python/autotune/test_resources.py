"""The resource model (device/resources.py): occupancy arithmetic against hand-computed
values, the fit checks, and the estimates read from real tile IR."""
import dataclasses
from types import SimpleNamespace

import pytest
import tessera
import tessera.language as tl
from fakes import FAKE_H100
from tessera.autotuner import resources
from tessera.autotuner.resources import Resources
from tessera.compiler import build_tile_ir


def props(**changes):
    return dataclasses.replace(FAKE_H100, **changes)


@pytest.mark.parametrize("threads, registers, shared, blocks, limiter", [
    (256, 32, 0, 8, "threads"),                 # 2048 / 256 threads; 65536 / (8 x 1024) regs
    (128, 128, 0, 4, "registers"),              # 4 warps x 4096 = 16384 -> 4 blocks
    (128, 16, 0, 16, "threads"),                # 2048 / 128
    (64, 16, 0, 32, "blocks per multiprocessor"),
    (128, 32, 100 * 1024, 2, "shared memory"),  # 233472 // (102400 + 1024)
    (1024, 64, 0, 1, "registers"),              # 32 warps x 2048 = 65536 regs: 1 block
])
def test_occupancy_by_hand(threads, registers, shared, blocks, limiter):
    got = resources.occupancy(Resources(threads, shared, registers), FAKE_H100)
    assert got == (blocks, limiter)


def test_register_allocation_granularity():
    # 65 registers round up to 72 per thread (256 per warp): 32 warps need 73728 > 65536.
    reason = resources.why_not_fit(Resources(1024, 0, 65), FAKE_H100)
    assert reason.startswith("too many registers") and "73728" in reason
    assert resources.why_not_fit(Resources(1024, 0, 64), FAKE_H100) is None


def test_fit_checks():
    assert "needs 2048 threads" in resources.why_not_fit(Resources(2048), FAKE_H100)
    over = resources.why_not_fit(Resources(128, 240 * 1024), FAKE_H100)
    assert over.startswith("out of shared memory")
    # Fits one block per SM only with the opt-in limit: the per-SM capacity decides.
    tight = props(max_shared_memory_per_multiprocessor=100 * 1024)
    assert "no block fits" in resources.why_not_fit(Resources(128, 100 * 1024), tight)
    assert resources.why_not_fit(Resources(128, 48 * 1024, 40), FAKE_H100) is None


def test_resident_limits_and_register_budget():
    assert resources.resident_limits(FAKE_H100) == (2048, 32)
    assert resources.resident_limits(props(compute_capability=(8, 6))) == (1536, 16)
    assert resources.resident_limits(props(compute_capability=(13, 0))) == (1536, 32)
    assert resources.register_budget(1024, FAKE_H100) == 64
    assert resources.register_budget(128, FAKE_H100) == 255
    assert resources.register_budget(384, FAKE_H100) == 168   # 170 rounded down to 8


def test_from_metadata():
    meta = {"num_warps": 8, "shared_bytes": 4096, "registers": 40}
    assert resources.from_metadata(meta) == Resources(256, 4096, 40)
    assert resources.from_metadata({"num_warps": 2}) == Resources(64, 0, 0)


@tessera.jit
def row_sum(x_ptr, out_ptr, n, rows, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.zeros([BLOCK], tl.float32)
    big = tl.zeros([BLOCK], tl.float64)
    for r in range(rows):
        acc += tl.load(x_ptr + r * n + offs, mask=mask, other=0.0)
        big += 1.0
    tl.store(out_ptr + offs, acc + big.to(tl.float32), mask=mask)


@tessera.jit
def add(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


SIGNATURE = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "rows": "i32"}


def module(fn, block, num_warps):
    signature = {k: v for k, v in SIGNATURE.items() if k in fn.runtime_names}
    return build_tile_ir(fn.fn, signature, {"BLOCK": block}, set(), set(), num_warps)


def test_loop_carried_registers_from_tile_ir():
    # fp32 + fp64 carried: 1024 elements over 128 threads = 8 + 16 words.
    estimate, carried = resources.estimate(module(row_sum, 1024, 4), 4, 1)
    assert estimate == Resources(128, 0, 0) and carried == 24
    assert resources.why_not_fit_before_compile(module(row_sum, 1024, 4), 4, 1,
                                                FAKE_H100) is None
    reason = resources.why_not_fit_before_compile(module(row_sum, 8192, 1), 1, 1, FAKE_H100)
    assert "loop-carried tiles need at least 768 registers" in reason
    assert resources.estimate(module(add, 65536, 1), 1, 1)[1] == 0   # no loop: nothing carried


def fake_type(shape=None, bits=32):
    element = SimpleNamespace(kind="scalar", bit_width=bits, is_float=lambda: True)
    return SimpleNamespace(is_tensor=lambda: shape is not None, shape=shape or [],
                           element_type=element)


def fake_op(name, operands=(), results=(), regions=()):
    return SimpleNamespace(name=name, operands=[SimpleNamespace(type=t) for t in operands],
                           results=[SimpleNamespace(type=t) for t in results],
                           num_regions=len(regions), body=lambda i: regions[i])


def test_pipelined_dot_operands_count_towards_shared_memory():
    # The op table has no dot yet: the walk is checked on stand-in ops of the same shape.
    a, b = fake_type([128, 64], 16), fake_type([64, 256], 16)      # 16 KiB + 32 KiB
    dot = fake_op("dot", [a, b, fake_type([128, 256])], [fake_type([128, 256])])
    loop = fake_op("for", results=[fake_type([128, 256])],
                   regions=[SimpleNamespace(operations=[dot])])
    func = SimpleNamespace(body=lambda i: SimpleNamespace(operations=[loop]))
    mod = SimpleNamespace(functions=lambda: [func])
    estimate, carried = resources.estimate(mod, 8, 4)
    assert estimate.shared_bytes == 3 * (16 + 32) * 1024 and carried == 128
    assert resources.estimate(mod, 8, 1)[0].shared_bytes == 0        # not pipelined
    assert resources.why_not_fit_before_compile(mod, 8, 6, FAKE_H100).startswith(
        "out of shared memory")                                       # 5 x 48 KiB
    assert "loop-carried" in resources.why_not_fit_before_compile(mod, 4, 2, FAKE_H100)


@tessera.jit
def dot_loop(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    offs_m, offs_n, offs_k = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * K + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * BN + offs_n[None, :]
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        acc += tl.dot(tl.load(a_ptrs), tl.load(b_ptrs))
        a_ptrs += BK
        b_ptrs += BK * BN
    tl.store(c_ptr + offs_m[:, None] * BN + offs_n[None, :], acc.to(tl.float16))


def test_loop_carried_pointer_tiles_are_not_counted():
    # The matmul's carried pointer tiles are a base plus arange offsets (one base register
    # and immediates after codegen), so only the fp32 accumulator bounds the registers:
    # 256 x 128 over 256 threads = 128 words, not 320 with the 64-bit pointer tiles.
    signature = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "K": "i32"}
    mod = build_tile_ir(dot_loop.fn, signature, {"BM": 256, "BN": 128, "BK": 64}, set(),
                        set(), 8)
    assert resources.estimate(mod, 8, 3)[1] == 128
    assert resources.why_not_fit_before_compile(mod, 8, 3, FAKE_H100) is None
