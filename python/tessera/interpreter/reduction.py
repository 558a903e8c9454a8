"""Interpreter handlers of `reduce` and `scan`: the combiner region runs on whole NumPy slices
at once (vectorized), in a fixed order, so results are deterministic:

- reduce: a pairwise tree along the axis, combine(first half, second half) until one slice is
  left (an odd last slice is carried to the next round). The GPU combines in another order
  (registers in sequence, then butterfly shuffles, then warps), so float sums agree with it to
  rounding, not bit for bit; min, max, argmin/argmax and integer sums agree exactly.
- scan: Hillis-Steele along the axis, for offset 1, 2, 4, ...: x[i] = combine(x[i - offset],
  x[i]); ``reverse`` scans the flipped axis (the element after i is combined into i).

The combiner takes (acc..., cur...) and returns one value per operand; the earlier elements
along the axis are always the accumulated (left) side.
"""
from __future__ import annotations

from typing import Callable, List, Sequence

import numpy as np

from .handlers import handles
from .plan import OpInfo, PlanError

Combine = Callable[[object, List[np.ndarray], List[np.ndarray]], List[np.ndarray]]


def _combiner(info: OpInfo) -> Combine:
    """combine(state, acc, cur) -> one array per operand, running the region's steps on arrays.

    The region's ops are scalar ops whose handlers are NumPy-vectorized; only select has a
    scalar fast path (`a if c else b`), so it is evaluated here with np.where."""
    if len(info.blocks) != 1:
        raise PlanError(f"{info.name} needs one combiner region")
    block = info.blocks[0]
    dtypes = [t.dtype for t in info.operands]
    if len(block.term_slots) != len(dtypes):
        raise PlanError(f"{info.name}'s combiner must yield one value per operand")

    def combine(state, acc: Sequence[np.ndarray], cur: Sequence[np.ndarray]) -> List[np.ndarray]:
        env = state.env
        for slot, value in zip(block.arg_slots, [*acc, *cur], strict=True):
            env[slot] = value
        for step in block.steps:
            operands = [env[i] for i in step.ins]
            if step.name == "select":
                result = np.where(*operands)
            else:
                result = step.fn(state, *operands)
            if step.outs:
                env[step.outs[0]] = result
        shape = np.shape(acc[0])
        out = []
        for slot, dtype in zip(block.term_slots, dtypes, strict=True):
            value = np.asarray(env[slot])
            if value.dtype != dtype:
                raise RuntimeError(f"combiner produced {value.dtype}, expected {dtype}")
            out.append(np.broadcast_to(value, shape))  # a yielded constant: one per element
        return out

    return combine


def _check_operands(info: OpInfo) -> int:
    axis = int(info.attrs["axis"])
    for operand in info.operands:
        if not 0 <= axis < len(operand.shape):
            raise PlanError(f"{info.name} axis {axis} is not a dim of {operand.text}")
    return axis


@handles("reduce")
def _reduce(info: OpInfo):
    axis = _check_operands(info)
    combine = _combiner(info)

    def reduce(state, *tensors):
        slices = [np.moveaxis(np.asarray(t), axis, 0) for t in tensors]
        while slices[0].shape[0] > 1:
            length = slices[0].shape[0]
            half = length // 2
            combined = combine(state, [s[:half] for s in slices],
                               [s[half:2 * half] for s in slices])
            if length % 2:
                combined = [np.concatenate([c, s[2 * half:]])
                            for c, s in zip(combined, slices, strict=True)]
            slices = combined
        # rank 1 gives NumPy scalars (s[0] of a 1-D array), as the evaluator expects.
        return tuple(s[0] if s.ndim == 1 else np.ascontiguousarray(s[0]) for s in slices)

    return reduce


@handles("scan")
def _scan(info: OpInfo):
    axis = _check_operands(info)
    reverse = bool(info.attrs.get("reverse", False))
    combine = _combiner(info)

    def scan(state, *tensors):
        slices = [np.moveaxis(np.asarray(t), axis, 0) for t in tensors]
        if reverse:
            slices = [s[::-1] for s in slices]
        length = slices[0].shape[0]
        offset = 1
        while offset < length:
            combined = combine(state, [s[:-offset] for s in slices], [s[offset:] for s in slices])
            slices = [np.concatenate([s[:offset], c])
                      for s, c in zip(slices, combined, strict=True)]
            offset *= 2
        if reverse:
            slices = [s[::-1] for s in slices]
        return tuple(np.ascontiguousarray(np.moveaxis(s, 0, axis)) for s in slices)

    return scan
