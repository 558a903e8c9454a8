"""The pipeliner's rings for 1-D rows of scalars (cpp/transforms/pipeline/schedule.cpp): a row
loaded each step and used in the layout of a dot's columns (attention's lse and delta) is
copied a step ahead by cp.async and read from its ring straight in that layout, with no
conversion through shared memory in the loop; a row already loaded in a layout of more than
16 bytes per thread (rematerialized next to a small accumulator) keeps its plain load, since
each thread would copy all of its duplicates. The compiled IR runs in the interpreter against
float64."""
import re

import numpy as np
import pytest
import tessera
import tessera.language as tl
from tessera import interpreter
from tessera._tessera import ir


@tessera.jit
def scaled_products(a_ptr, b_ptr, s_ptr, out_ptr, K, N: tl.constexpr):
    # out = sum over steps k of (A_k B_k) * s_k[None, :]: one row of N scalars per step.
    rows = tl.arange(0, 64)
    cols = tl.arange(0, N)
    ks = tl.arange(0, 32)
    acc = tl.zeros((64, N), tl.float32)
    for k in range(0, K, 32):
        a = tl.load(a_ptr + rows[:, None] * K + (k + ks)[None, :])
        b = tl.load(b_ptr + (k + ks)[:, None] * N + cols[None, :])
        s = tl.load(s_ptr + (k // 32) * N + cols)
        acc += tl.dot(a, b) * s[None, :]
    tl.store(out_ptr + rows[:, None] * N + cols[None, :], acc)


def compile_case(N, arch="sm_90a"):
    a = np.zeros((64, 128), np.float16)
    b = np.zeros((128, N), np.float16)
    s = np.zeros((4, N), np.float32)
    out = np.zeros((64, N), np.float32)
    return scaled_products.compile(a, b, s, out, 128, N=N, num_warps=4, num_stages=2,
                                   arch=arch)


def loop_of(tgir: str) -> str:
    body = tgir[tgir.index(" = for "):]
    return body[:body.index("\n    }")]


def test_a_row_used_in_the_accumulators_layout_is_read_from_its_ring():
    # 64 x 256 fp32 accumulators: 128 registers per thread, so the row is not rematerialized
    # beside them (remove_layout_conversions) and is loaded one register per thread.
    tgir = compile_case(256).asm["tgir"]
    ring = re.search(r"(%\d+) = local_alloc .*: \(\) -> tensor<2x256xf32,", tgir)
    assert ring, tgir
    loop = loop_of(tgir)
    assert re.search(r"local_load " + ring.group(1) + r", %\d+ : .* -> tensor<256xf32, #slice",
                     loop)
    assert "convert_layout" not in loop
    assert not re.search(r" = load ", loop)
    assert loop.count("barrier") == 1  # the ring's own, at the top of the step


def test_a_row_with_many_registers_per_thread_keeps_its_load():
    # 64 x 64 accumulators (32 registers): the row is loaded in the columns' layout directly,
    # 16 values per thread; copying those would repeat the row across the lanes that share it.
    tgir = compile_case(64).asm["tgir"]
    assert not re.search(r"local_alloc .*: \(\) -> tensor<2x64xf32,", tgir)
    assert re.search(r" = load [^\n]*-> tensor<64xf32, #slice", loop_of(tgir))


@pytest.mark.parametrize("N", [64, 256])
def test_the_compiled_ir_matches_float64(N):
    rng = np.random.default_rng()
    K = 128
    a = (rng.standard_normal((64, K)) * 0.5).astype(np.float16)
    b = (rng.standard_normal((K, N)) * 0.5).astype(np.float16)
    s = rng.standard_normal((K // 32, N)).astype(np.float32)
    out = np.full((64, N), np.nan, np.float32)
    module = ir.parse_module(compile_case(N).asm["tgir"])
    interpreter.run(module, grid=(1,), args=[a, b, s, out, K])
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = sum((a64[:, k:k + 32] @ b64[k:k + 32]) * s[k // 32].astype(np.float64)
              for k in range(0, K, 32))
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
