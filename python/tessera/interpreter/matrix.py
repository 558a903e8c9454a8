"""Interpreter handlers of the tensor-core ops: ``dot`` and ``trans``, and the shared-memory ops
the pipeliner introduces (``local_alloc``, ``local_load``, ``async_copy``,
``async_commit_group``, ``async_wait``, ``barrier``, ``wgmma_wait`` and ``warpgroup_turn``:
no-ops, every op completes at once here), registered in handlers.HANDLERS.

The numerics of ``dot`` (the reference GPU results are compared against):

- float16 / bfloat16 inputs: every product is exact; the K products and the accumulator are
  summed in float64 and the sum is rounded once to the result type (float32, or float16).
  Tensor cores sum in a hardware-specific order with float32 (or wider) partial sums, so the
  GPU differs from this by a few float32 ulps of the larger partial sums.
- float32 inputs, input_precision "tf32": each input is first rounded to tf32 (10 explicit
  mantissa bits, round to nearest with ties away from zero: PTX's cvt.rna.tf32.f32), then as
  above. "tf32x3": a = big + small with big = tf32(a) and small = tf32(a - big); the result is
  big_a big_b + big_a small_b + small_a big_b (small_a small_b dropped), as the three tensor
  core products compute it. "ieee": the exact float32 products, summed in float64.
- float64 inputs: float64 products and sums (NumPy's matmul); int8 inputs: exact integer
  products and sums, wrapped to int32 as the GPU's 32-bit adds do.

Shared-memory buffers are NumPy arrays that the ops update in place; asynchronous copies
complete at once (the interpreter runs one thread of control), so waits and barriers do
nothing and only the data movement remains to check.
"""
from __future__ import annotations

import numpy as np

from . import numerics as nm
from .handlers import handles
from .plan import OpInfo, PlanError

F64 = np.dtype(np.float64)


def round_to_tf32(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to tf32 (10 explicit mantissa bits), ties away from zero; NaN and
    infinities pass unchanged, values past the tf32 range round to infinity."""
    x = np.asarray(x, dtype=nm.F32)
    bits = x.view(np.uint32)
    rounded = ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(nm.F32)
    return np.where(np.isfinite(x), rounded, x)


def dot_reference(a: np.ndarray, b: np.ndarray, acc: np.ndarray, precision: str) -> np.ndarray:
    """``a @ b + acc`` in float64 with the inputs prepared as ``precision`` says (see the
    module docstring); the caller rounds the result to its type."""
    if a.dtype == nm.F32 and precision == "tf32":
        a, b = round_to_tf32(a), round_to_tf32(b)
    if a.dtype == nm.F32 and precision == "tf32x3":
        a_big, b_big = round_to_tf32(a), round_to_tf32(b)
        a_small, b_small = round_to_tf32(a - a_big), round_to_tf32(b - b_big)
        a_big, b_big, a_small, b_small = (x.astype(F64) for x in (a_big, b_big, a_small, b_small))
        return a_big @ b_big + (a_big @ b_small + a_small @ b_big) + acc.astype(F64)
    return a.astype(F64) @ b.astype(F64) + acc.astype(F64)


@handles("dot")
def _dot(info: OpInfo):
    result = info.results[0].dtype
    precision = info.attrs.get("input_precision", "tf32")
    if precision not in ("tf32", "tf32x3", "ieee"):
        raise PlanError(f"unknown input_precision '{precision}'")

    if result.kind == "i":  # int8 operands, int32 sums wrapping modulo 2**32
        def int_dot(state, a, b, acc):
            exact = np.asarray(a).astype(np.int64) @ np.asarray(b).astype(np.int64)
            return nm.int_cast(exact + np.asarray(acc).astype(np.int64), result, False)
        return int_dot

    def dot(state, a, b, acc):
        return nm.to_float(dot_reference(np.asarray(a), np.asarray(b), np.asarray(acc),
                                         precision), result)

    return dot


@handles("trans")
def _trans(info: OpInfo):
    order = tuple(int(d) for d in info.attrs["order"])
    return lambda state, x: np.transpose(x, order)


# --- shared memory ------------------------------------------------------------------------------

@handles("local_alloc")
def _local_alloc(info: OpInfo):
    shape, dtype = info.results[0].shape, info.results[0].dtype

    def local_alloc(state, source=None):
        if source is None:
            return np.zeros(shape, dtype)  # the GPU leaves it undefined
        return np.array(np.broadcast_to(source, shape), dtype)

    return local_alloc


@handles("local_load")
def _local_load(info: OpInfo):
    transposed = "order" in info.attrs  # a transposed view: [1, 0]

    def local_load(state, buffer, slot=None):
        tile = buffer if slot is None else buffer[int(slot)]
        return np.array(tile.T if transposed else tile)

    return local_load


@handles("async_copy")
def _async_copy(info: OpInfo):
    shape = info.operands[0].shape
    dtype = info.operands[1].dtype

    def async_copy(state, pointers, buffer, slot, mask=None):
        pointers = np.asarray(pointers)
        if mask is not None:
            mask = np.broadcast_to(mask, shape)
        values, lanes = state.memory.load(pointers, mask, dtype)
        out = np.zeros(shape, dtype)  # masked-off elements are zero-filled, as cp.async's
        if lanes is None:
            out[...] = values.reshape(shape)
        else:
            out.reshape(-1)[lanes] = values
        buffer[int(slot)] = out

    return async_copy


@handles("async_commit_group", "async_wait", "barrier", "wgmma_wait", "warpgroup_turn")
def _synchronization(info: OpInfo):
    return lambda state: None
