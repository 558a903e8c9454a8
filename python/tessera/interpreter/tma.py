"""Interpreter handlers of the TMA and mbarrier ops (``tma_load``, ``mbarrier_init``,
``mbarrier_expect_tx``, ``mbarrier_wait``, ``mbarrier_arrive``, ``mbarrier_inval``,
``warp_specialize``: warp_roles.py; ops.def) and the binding of
tensor-map arguments, registered in handlers.HANDLERS.

A tensor-map argument is given its host ``TensorDescriptor``: its base is mapped like any
pointer argument and the map keeps the shape and byte strides the host encodes
(runtime/tensor_map.py), so ``tma_load`` reads a box exactly as the TMA unit does: the
elements inside the tensor, the padding (0, or NaN) outside.

A map the kernel encodes itself (``tensormap_create``, a device-side
``tl.make_tensor_descriptor`` under TESSERA_TMA) is kept by its address in the global scratch
(``global_scratch``: each program's part of a zeroed buffer the interpreter maps as the
launcher's allocator would give it); ``tma_load`` finds it there. What the TMA unit would
refuse is a fault: a map not 128-byte aligned, a tensor address or row stride that is not a
multiple of 16 bytes.

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
from .host_arrays import as_array
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
    if not isinstance(obj, TensorDescriptor):
        reject(f"a tensor-map parameter takes the TensorDescriptor it was made from, got "
               f"{type(obj).__name__}")
    array = as_array(obj.base, reject)
    base = memory.add(array, index, name)
    itemsize = array.dtype.itemsize
    maps = memory.__dict__.setdefault("tensor_maps", [])
    maps.append(TensorMap(int(base), list(obj.shape), [s * itemsize for s in obj.strides],
                          float("nan") if obj.padding == "nan" else 0.0))
    return np.int64(len(maps) - 1)


def map_global_scratch(memory, per_program: int, grid) -> None:
    """Maps the launch's global scratch (``per_program`` bytes for each program of ``grid``,
    zeroed and 128-byte aligned, as the launcher asks the allocator for) and records where."""
    total = per_program * int(np.prod(grid))
    raw = np.zeros(total + 128, np.uint8)
    start = -raw.ctypes.data % 128
    base = memory.add(raw[start:start + total], None, "the global scratch (set_allocator)")
    memory.__dict__["global_scratch"] = (int(base), per_program)


@handles("global_scratch")
def _global_scratch(info: OpInfo):
    offset = int(info.attrs["offset"])

    def global_scratch(state):
        base, per_program = state.memory.global_scratch
        x, y, z = (tuple(state.pid) + (0, 0))[:3]
        program = x + state.grid[0] * (y + state.grid[1] * z)  # x fastest, as codegen
        return np.int64(base + program * per_program + offset)
    return global_scratch


@handles("tensormap_create")
def _tensormap_create(info: OpInfo):
    rank = len(info.attrs["box_dim"])
    pointee = info.operands[1].pointee
    assert pointee is not None  # the verifier checked: the base is a pointer
    itemsize = pointee.itemsize
    fill = float("nan") if int(info.attrs["fill_mode"]) == 1 else 0.0

    def tensormap_create(state, scratch, base, *dims_and_strides):
        address = int(scratch)
        if address % 128:
            raise OpFault(f"tensormap_create: the map at {address:#x} is not 128-byte aligned")
        shape = [int(d) for d in dims_and_strides[:rank]]
        strides = [int(s) * itemsize for s in dims_and_strides[rank:]] + [itemsize]
        host = int(state.memory.to_host(np.int64(base)))
        if host % 16 or any(s % 16 for s in strides[:-1]):
            raise OpFault(f"tensormap_create: the TMA needs a 16-byte aligned tensor and row "
                          f"strides of multiples of 16 bytes, got address {host:#x} and byte "
                          f"strides {strides[:-1]} (device descriptors under TESSERA_TMA)")
        # The 128 bytes are written (a store outside the scratch faults as on the GPU).
        state.memory.store(np.arange(address, address + 128, dtype=np.int64),
                           np.zeros(128, np.uint8), None)
        maps = state.memory.__dict__.setdefault("device_tensor_maps", {})
        maps[address] = TensorMap(int(base), shape, strides, fill)
        return np.int64(address)
    return tensormap_create


def _tensor_map(memory, handle: int) -> TensorMap:
    """A host map's index (bind_tensor_map) or a device map's address (tensormap_create)."""
    device = memory.__dict__.get("device_tensor_maps", {})
    return device[handle] if handle in device else memory.tensor_maps[handle]


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

    def tma_load(state, handle, ring, slot, barriers, pred, *coords):
        # Coordinates outermost first: the map's leading dims (box 1), then row and column.
        if not pred:
            return
        tmap = _tensor_map(state.memory, int(handle))
        if len(coords) != len(tmap.shape):
            raise OpFault(f"tma_load: {len(coords)} coordinates for a tensor map of rank "
                          f"{len(tmap.shape)}")
        *outer, row, col = (int(c) for c in coords)
        i = row + np.arange(rows, dtype=np.int64)[:, None]
        j = col + np.arange(cols, dtype=np.int64)[None, :]
        inside = (i >= 0) & (i < tmap.shape[-2]) & (j >= 0) & (j < tmap.shape[-1])
        offset = 0
        for c, size, stride in zip(outer, tmap.shape, tmap.strides):
            inside &= 0 <= c < size
            offset += c * stride
        addresses = tmap.base + np.where(
            inside, offset + i * tmap.strides[-2] + j * tmap.strides[-1], 0)
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
