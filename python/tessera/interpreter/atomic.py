"""Interpreter handlers of atomic_rmw and atomic_cas: sequential semantics, in program order.

Programs run one after another (evaluator.py), so every atomic is simply a read, a combine
and a write. Inside one tile op the active elements apply in row-major order: where addresses
repeat, each element sees the updates of the ones before it, and returns the value it saw.
Masked-off elements are not touched and return 0. Float adds round once in the element type;
integer ops wrap; umax/umin compare the bits as unsigned; fmax/fmin (16-bit floats, from
descriptor reductions) ignore a NaN operand; atomic_cas compares bits. sem and
scope do not change a sequential execution.
"""
from __future__ import annotations

import numpy as np

from . import numerics as nm
from .handlers import handles
from .plan import OpInfo, PlanError


def _combiner(kind: str, dtype: np.dtype):
    """new = f(old, value) on arrays of the element type."""
    if kind == "fadd":
        return nm.float_op(np.add, dtype)
    if kind in ("fmin", "fmax"):  # IEEE minNum / maxNum: a NaN operand gives the other one
        return nm.float_op(np.fmin if kind == "fmin" else np.fmax, dtype)
    if kind == "xchg":
        return lambda old, value: value
    if kind in ("add", "and", "or", "xor"):
        fn = {"add": np.add, "and": np.bitwise_and, "or": np.bitwise_or,
              "xor": np.bitwise_xor}[kind]
        return lambda old, value: nm.from_bits(fn(nm.as_unsigned(old), nm.as_unsigned(value)),
                                               dtype)
    if kind in ("max", "min", "umax", "umin"):
        view = nm.as_unsigned if kind.startswith("u") else nm.as_signed
        fn = np.maximum if kind.endswith("max") else np.minimum
        return lambda old, value: nm.from_bits(fn(view(old), view(value)), dtype)
    raise PlanError(f"unknown atomic_rmw kind '{kind}'")


def _apply(state, pointer, mask, dtype: np.dtype, shape, update) -> np.ndarray:
    """Runs `update(old, lanes) -> new` on the active lanes; returns the old values (0 where
    masked off). Loads all active lanes first, which checks every address with a message
    naming its lane; lanes sharing an address then apply one at a time, in row-major order."""
    pointer = np.asarray(pointer)
    if mask is not None:
        mask = np.broadcast_to(mask, pointer.shape)
    current, lanes = state.memory.load(pointer, mask, dtype)
    if lanes is None:
        lanes = np.arange(pointer.size)
    addresses = pointer.reshape(-1)[lanes]
    old = np.zeros(pointer.size, dtype)
    if np.unique(addresses).size == addresses.size:
        old[lanes] = current
        state.memory.store(addresses, update(current, lanes), None)
    else:
        for position, lane in enumerate(lanes):
            address = addresses[position:position + 1]
            seen, _ = state.memory.load(address, None, dtype)
            old[lane] = seen[0]
            state.memory.store(address, update(seen, lanes[position:position + 1]), None)
    return old.reshape(shape)


@handles("atomic_rmw")
def _atomic_rmw(info: OpInfo):
    result = info.results[0]
    dtype, shape = result.dtype, result.shape
    combine = _combiner(str(info.attrs["kind"]), dtype)

    def rmw(state, pointer, value, mask=None, *tensor_map):
        # A descriptor reduction under TESSERA_TMA_REDUCE also carries its tensor map and box
        # coordinates: the masked atomic is its meaning (the TMA clips the box as the mask does).
        values = np.broadcast_to(np.asarray(value, dtype), np.shape(pointer)).reshape(-1)
        return _apply(state, pointer, mask, dtype, shape,
                      lambda old, lanes: np.asarray(combine(old, values[lanes]), dtype))

    return rmw


@handles("atomic_cas")
def _atomic_cas(info: OpInfo):
    result = info.results[0]
    dtype, shape = result.dtype, result.shape

    def cas(state, pointer, cmp, value):
        size = np.shape(pointer)
        cmps = np.broadcast_to(np.asarray(cmp, dtype), size).reshape(-1)
        values = np.broadcast_to(np.asarray(value, dtype), size).reshape(-1)

        def update(old, lanes):
            equal = nm.as_unsigned(old) == nm.as_unsigned(cmps[lanes])
            return np.where(equal, values[lanes], old)

        return _apply(state, pointer, None, dtype, shape, update)

    return cas
