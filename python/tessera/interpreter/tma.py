"""Interpreter handlers of the TMA and mbarrier ops (``tma_load``, ``mbarrier_init``,
``mbarrier_expect_tx``, ``mbarrier_wait``, ``mbarrier_arrive``, ``mbarrier_inval``,
``warp_specialize``: warp_roles.py; ops.def) and the binding of
tensor-map arguments, registered in handlers.HANDLERS.

A tensor-map argument is given its host ``TensorDescriptor``: its base is mapped like any
pointer argument and the map keeps the shape and byte strides the host encodes
(runtime/tensor_map.py), so ``tma_load`` reads a box exactly as the TMA unit does: the
elements inside the tensor, the padding (0, or NaN) outside.

Copies complete at once (one thread of control), but the mbarrier protocol is checked, not
skipped: each barrier holds its completed phases, whether this phase's arrival happened and
the bytes still expected. A phase completes when the arrival happened and every expected
byte landed; ``mbarrier_wait`` on a phase of the parity still in progress would never return
on the GPU, and is a fault here, as are a second arrival in one phase, copies of more bytes
than announced, and a barrier used before ``mbarrier_init`` or after ``mbarrier_inval``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List

import numpy as np

from . import warp_roles
from .errors import OpFault
from .handlers import handles
from .plan import OpInfo

_READY = 1 << 62  # initialized
_ARRIVED = 1 << 32
_PHASE = 1 << 40  # completed phases, above the arrival bit and the pending bytes


@dataclass
class TensorMap:
    """A tensor map as the interpreter reads it: the base's virtual address, the shape and
    byte strides (outermost dim first), and the padding's value."""

    base: int
    shape: List[int]
    strides: List[int]
    fill: float


def bind_tensor_map(obj: Any, memory, index: int, name: str, reject) -> np.int64:
    """The value of a tensor-map argument: a handle to its TensorMap (``memory.tensor_maps``)."""
    from ..tools.tensor_descriptor import TensorDescriptor
    from .arguments import _as_array
    if not isinstance(obj, TensorDescriptor):
        reject(f"a tensor-map parameter takes the TensorDescriptor it was made from, got "
               f"{type(obj).__name__}")
    array = _as_array(obj.base, reject)
    base = memory.add(array, index, name)
    itemsize = array.dtype.itemsize
    maps = memory.__dict__.setdefault("tensor_maps", [])
    maps.append(TensorMap(int(base), list(obj.shape), [s * itemsize for s in obj.strides],
                          float("nan") if obj.padding == "nan" else 0.0))
    return np.int64(len(maps) - 1)


def _fields(word: int):
    return word // _PHASE % (1 << 20), bool(word & _ARRIVED), word % _ARRIVED


def _check_ready(barriers: np.ndarray, slot: int, what: str) -> int:
    word = int(barriers[slot])
    if not word & _READY:
        raise OpFault(f"{what} on mbarrier {slot}, which is not initialized (mbarrier_init) "
                      "or was invalidated")
    return word - _READY


def _complete_bytes(barriers: np.ndarray, slot: int, count: int) -> None:
    """``count`` bytes land on barriers[slot]; the phase completes when none are pending."""
    phases, arrived, pending = _fields(_check_ready(barriers, slot, "a copy completes"))
    pending -= count
    if pending < 0:
        raise OpFault(f"a copy completes {count} bytes on mbarrier {slot}, more than "
                      "mbarrier_expect_tx announced")
    if arrived and pending == 0:
        phases, arrived = phases + 1, False
    barriers[slot] = _READY + phases * _PHASE + (_ARRIVED if arrived else 0) + pending


@handles("mbarrier_init")
def _init(info: OpInfo):
    def mbarrier_init(state, barriers):
        barriers[...] = _READY
    return mbarrier_init


@handles("mbarrier_expect_tx")
def _expect_tx(info: OpInfo):
    count = int(info.attrs["bytes"])

    def mbarrier_expect_tx(state, barriers, slot, pred):
        if not pred:
            return
        slot = int(slot)
        phases, arrived, pending = _fields(_check_ready(barriers, slot, "mbarrier_expect_tx"))
        if arrived:
            raise OpFault(f"a second arrival on mbarrier {slot} in one phase (count = 1)")
        barriers[slot] = _READY + phases * _PHASE + _ARRIVED + pending + count
        _complete_bytes(barriers, slot, 0)
    return mbarrier_expect_tx


@handles("tma_load")
def _tma_load(info: OpInfo):
    rows, cols = info.operands[1].shape[1:]
    dtype = info.operands[1].dtype

    def tma_load(state, handle, ring, slot, barriers, pred, row, col):
        if not pred:
            return
        tmap = state.memory.tensor_maps[int(handle)]
        i = int(row) + np.arange(rows, dtype=np.int64)[:, None]
        j = int(col) + np.arange(cols, dtype=np.int64)[None, :]
        inside = (i >= 0) & (i < tmap.shape[0]) & (j >= 0) & (j < tmap.shape[1])
        addresses = tmap.base + np.where(inside, i * tmap.strides[0] + j * tmap.strides[1], 0)
        values, lanes = state.memory.load(addresses, inside, dtype)
        box = np.full((rows, cols), tmap.fill, dtype)  # the TMA unit's out-of-bounds fill
        box.reshape(-1)[lanes] = values
        ring[int(slot)] = box
        _complete_bytes(barriers, int(slot), box.nbytes)
    return tma_load


@handles("mbarrier_wait")
def _wait(info: OpInfo):
    def mbarrier_wait(state, barriers, slot, phase, pred=True):
        if not pred:  # the issuing thread's wait for a release, predicated off
            return
        slot = int(slot)

        def completed() -> bool:
            phases, _, _ = _fields(_check_ready(barriers, slot, "mbarrier_wait"))
            return phases % 2 != int(phase) % 2

        roles = warp_roles.current(state)
        if roles is not None:  # a warp-specialized program: the other role may complete it
            return roles.wait(completed, f"mbarrier_wait on mbarrier {slot} for parity "
                                         f"{int(phase)}")
        if not completed():
            phases, _, _ = _fields(_check_ready(barriers, slot, "mbarrier_wait"))
            raise OpFault(f"mbarrier_wait on mbarrier {slot} for parity {int(phase)} would "
                          f"never return: {phases} phases completed, so the current phase has "
                          "that parity and nothing else will complete it")
    return mbarrier_wait


@handles("mbarrier_arrive")
def _arrive(info: OpInfo):
    def mbarrier_arrive(state, barriers, slot, pred):
        # Every reading warp arrives at once here (one thread of control): the phase of an
        # empty barrier (count = the warps) completes.
        if not pred:
            return
        slot = int(slot)
        phases, arrived, pending = _fields(_check_ready(barriers, slot, "mbarrier_arrive"))
        if arrived or pending:
            raise OpFault(f"mbarrier_arrive on mbarrier {slot}: its phase already had its "
                          "arrivals")
        barriers[slot] = _READY + (phases + 1) * _PHASE
    return mbarrier_arrive


@handles("warp_specialize")
def _warp_specialize(info: OpInfo):
    region = info.blocks[0]

    def warp_specialize(state):
        warp_roles.start(state, region)  # runs when the consumers first wait (warp_roles.py)
        return ()
    return warp_specialize


@handles("mbarrier_inval")
def _inval(info: OpInfo):
    def mbarrier_inval(state, barriers):
        barriers[...] = 0
    return mbarrier_inval
