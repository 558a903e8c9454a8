# Pointer offsets past 2**31 in the interpreter: int32 arithmetic that computes an offset and
# overflows raises at its line (check_offsets marks it; the GPU does the same with debug=True),
# arithmetic outside the address slice keeps wrapping, and the IR widened for tensors past
# 2**31 elements (widen_offsets) computes what the int32 IR computes on ordinary sizes.
import inspect

import numpy as np
import pytest
import tessera
import tessera.language as tl
from tessera import interpreter
from tessera.compiler import build_tile_ir
from tessera.interpreter import KernelRuntimeError
from tessera.ops import fused_softmax, gemm


def line_of(fn, marker: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, text in enumerate(lines) if marker in text)


@tessera.jit(interpret=True)
def gather_rows(x_ptr, out_ptr, stride, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = row * stride + tl.arange(0, BLOCK)  # OFFSET
    mask = offs < n  # a wrapped offset is negative: this mask would let it through
    tl.store(out_ptr + row * BLOCK + tl.arange(0, BLOCK), tl.load(x_ptr + offs, mask=mask),
             mask=mask)


@tessera.jit(interpret=True)
def hash_values(out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    h = (offs + 2 ** 30) * 4  # wraps on purpose: a value, not an offset
    tl.store(out_ptr + offs, h)


def test_an_offset_that_overflows_int32_raises_at_its_line():
    x = np.arange(8, dtype=np.float32)
    out = np.zeros((3, 4), np.float32)
    with pytest.raises(KernelRuntimeError) as info:
        gather_rows[(3,)](x, out, 2 ** 30, 8, BLOCK=4)
    text = str(info.value)
    assert "kernel 'gather_rows', program (2,)" in text
    assert f":{line_of(gather_rows.fn, '# OFFSET')}:" in text and "(muli)" in text
    assert "int32 overflow in the offset of a pointer: 2 * 1073741824 = 2147483648 does not " \
           "fit in int32" in text
    assert "tensors of 2**31 elements or more" in text and "x.to(tl.int64)" in text
    assert "offs = row * stride + tl.arange(0, BLOCK)" in text  # the source line, with a caret
    assert info.value.op == "muli" and info.value.pid == (2,)


def test_an_offset_that_fits_runs():
    x = np.arange(64, dtype=np.float32)
    out = np.zeros((3, 4), np.float32)
    gather_rows[(3,)](x, out, 20, 64, BLOCK=4)
    np.testing.assert_array_equal(out, x[np.arange(3)[:, None] * 20 + np.arange(4)])


def test_a_tensor_offset_names_its_lane():
    x = np.arange(8, dtype=np.float32)
    out = np.zeros((2, 4), np.float32)
    with pytest.raises(KernelRuntimeError, match=r"\(addi\): int32 overflow in the offset of a "
                                                 r"pointer: 2147483646 \+ 2 = 2147483648 does "
                                                 r"not fit in int32 \(lane \[2\]\)"):
        gather_rows[(2,)](x, out, 2 ** 31 - 2, 8, BLOCK=4)


def test_arithmetic_outside_offsets_wraps_as_before():
    out = np.zeros(8, np.int32)
    hash_values[(1,)](out, BLOCK=8)
    expected = ((np.arange(8, dtype=np.int64) + 2 ** 30) * 4 + 2 ** 31) % 2 ** 32 - 2 ** 31
    np.testing.assert_array_equal(out, expected.astype(np.int32))


# --- the widened IR on ordinary sizes -------------------------------------------------------

def _run(kernel, grid, args, constexprs, large):
    """Runs the IR of `kernel` built as for tensors past 2**31 elements (the parameters in
    `large`), on these ordinary-size arrays, in the interpreter."""
    names = [n for n in kernel.arg_names if n not in constexprs]
    signature = {}
    for name, value in zip(names, args):
        if isinstance(value, np.ndarray):
            signature[name] = "*" + {"float32": "fp32", "float16": "fp16"}[value.dtype.name]
        else:
            signature[name] = "i32"
    module = build_tile_ir(kernel.fn, signature, constexprs, interpreter=True,
                           large_tensors=set(large))
    assert "large_tensors" in module.str()
    interpreter.run(module, grid, list(args), kernel_name=kernel.__name__)
    return module


def test_widened_matmul_matches_numpy(rng):
    M, N, K = 70, 45, 100  # not multiples of the blocks
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    bias = rng.standard_normal(N).astype(np.float16)
    for large in (["a_ptr"], ["b_ptr"], ["c_ptr"], ["a_ptr", "b_ptr", "c_ptr", "bias_ptr"]):
        c = np.full((M, N), np.nan, np.float16)
        meta = dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_SIZE_M=2, HAS_BIAS=True,
                    ACTIVATION="")
        grid = (tessera.cdiv(M, 32) * tessera.cdiv(N, 32),)
        module = _run(gemm.matmul_kernel, grid,
                      (a, b, c, bias, M, N, K, K, 1, N, 1, N, 1), meta, large)
        assert "remsi" in module.str() and "i64" in module.str()
        want = a.astype(np.float64) @ b.astype(np.float64) + bias
        np.testing.assert_allclose(c.astype(np.float64), want, rtol=5e-3, atol=5e-2)


def test_widened_softmax_matches_numpy(rng):
    x = rng.standard_normal((37, 50)).astype(np.float32)
    out = np.full_like(x, np.nan)
    _run(fused_softmax.softmax_kernel, (tessera.cdiv(37, 4),), (out, x, 50, 50, 37, 50),
         dict(BLOCK_ROWS=4, BLOCK_COLS=64), ["out_ptr", "in_ptr"])
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


@tessera.jit
def carried_offsets(x_ptr, out_ptr, stride, n_steps, BLOCK: tl.constexpr):
    """Sums every `stride`-th block of x with an int32 offset carried through the loop."""
    offs = tl.program_id(0) * BLOCK
    acc = tl.zeros((BLOCK,), tl.float32)
    for _ in range(n_steps):
        acc += tl.load(x_ptr + offs + tl.arange(0, BLOCK))
        offs = offs + stride
    tl.store(out_ptr + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK), acc)


def test_widened_loop_carried_offsets_match_numpy(rng):
    x = rng.standard_normal(4 * 16 * 5).astype(np.float32)
    out = np.zeros(4 * 16, np.float32)
    module = _run(carried_offsets, (4,), (x, out, 64, 5), dict(BLOCK=16), ["x_ptr"])
    assert "(i32, i32, i32, tensor<16xf32>, i64)" in module.str()  # the carried i64 twin
    want = x.reshape(5, 64).sum(axis=0)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
