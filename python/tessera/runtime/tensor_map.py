"""The arguments of ``cuTensorMapEncodeTiled`` for a host ``TensorDescriptor`` (TMA, sm_90a).

With ``TESSERA_TMA=1`` on sm_90a a descriptor argument also passes a ``CUtensorMap``: 128
opaque bytes the driver encodes from these arguments, which the kernel receives as a
64-byte-aligned ``__grid_constant__`` parameter and names in ``cp.async.bulk.tensor``.
Computing them is plain arithmetic (tested on the CPU); only the encoding call needs a GPU.

The driver orders dims innermost first (the reverse of the tensor's): ``global_dim[0]`` is the
contiguous dim. Strides are in bytes, one per dim but the innermost. The box, its swizzle and
the element type follow the TMA's rules (device/tma.py, re-exported here), the same ones a
device-side ``tl.make_tensor_descriptor`` follows when the kernel encodes its own map
(language/device_tensor_map.py), so both paths copy a block into the same shared layout.
Out-of-bounds elements of a box are filled by the TMA unit: zeros, or NaN for
``padding="nan"``. Example::

    args = encode_arguments(TensorDescriptor.from_tensor(a, [128, 64]))
    args.box_dim  # [64, 128]: 64 fp16 (128 bytes) along K, 128 rows
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, List

# The TMA's rules, shared with maps kernels encode themselves (see the module docstring).
from ..device.tma import (  # noqa: F401  (re-exported: tensor_map.box_and_swizzle, ...)
    DATA_TYPES,
    ELEMENT_TYPES,
    MAX_BOX,
    OOB_FILL_NAN,
    OOB_FILL_ZERO,
    SWIZZLE_32B,
    SWIZZLE_64B,
    SWIZZLE_128B,
    SWIZZLE_BYTES,
    SWIZZLE_NONE,
    box_and_swizzle,
    device_fields,
    swizzle_for,
)
from ..tools.tensor_descriptor import TensorDescriptor, data_pointer
from ..type_codes import dtype_code

INTERLEAVE_NONE = 0
L2_PROMOTION_128B = 2
MAX_STRIDE = 1 << 40  # bytes


@dataclass
class TensorMapArguments:
    """``cuTensorMapEncodeTiled``'s arguments but the map itself, innermost dim first."""

    data_type: int
    rank: int
    global_address: int
    global_dim: List[int]
    global_strides: List[int]  # bytes, rank - 1 of them
    box_dim: List[int]
    element_strides: List[int]
    interleave: int
    swizzle: int
    l2_promotion: int
    oob_fill: int

    @property
    def box_bytes(self) -> int:
        """Bytes one box writes into shared memory (the mbarrier's expected transaction)."""
        numel = 1
        for size in self.box_dim:
            numel *= size
        return numel * _itemsize_of(self.data_type)


def _itemsize_of(data_type: int) -> int:
    return {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2}[data_type]


def boxes_per_block(desc: TensorDescriptor) -> int:
    """How many boxes one block load issues: one per 128-byte column block of a swizzled
    block whose rows exceed 128 bytes, else one."""
    row_bytes = desc.block_shape[-1] * desc.base.dtype.itemsize
    return max(1, row_bytes // 128) if row_bytes > 128 else 1


def encode_arguments(desc: TensorDescriptor) -> TensorMapArguments:
    """The encoding arguments of ``desc``; ValueError where TMA cannot express it (the
    message names the limit)."""
    code = dtype_code(desc.base.dtype)
    if code not in DATA_TYPES:
        raise ValueError(f"TMA: no tensor-map data type for {code}")
    itemsize = desc.base.dtype.itemsize
    rank = len(desc.shape)
    box, swizzle = box_and_swizzle(list(desc.block_shape), itemsize)
    strides = [s * itemsize for s in reversed(desc.strides[:-1])]
    if any(s % 16 or s >= MAX_STRIDE for s in strides):
        raise ValueError(f"TMA: strides must be multiples of 16 bytes below 2**40, got {strides}")
    address = data_pointer(desc.base)
    if address % 16:
        raise ValueError("TMA: the base address must be 16-byte aligned")
    return TensorMapArguments(
        data_type=DATA_TYPES[code], rank=rank, global_address=address,
        global_dim=list(reversed(desc.shape)), global_strides=strides, box_dim=box,
        element_strides=[1] * rank, interleave=INTERLEAVE_NONE, swizzle=swizzle,
        l2_promotion=L2_PROMOTION_128B,
        oob_fill=OOB_FILL_NAN if desc.padding == "nan" else OOB_FILL_ZERO)


def encode(desc: TensorDescriptor) -> bytes:
    """The 128-byte CUtensorMap of ``desc`` (needs a CUDA driver, compute capability 9.0)."""
    from .._tessera import runtime as _runtime  # the driver wrapper (cpp/runtime/cuda_driver)
    a = encode_arguments(desc)
    return _runtime.encode_tensor_map_tiled(
        a.data_type, a.rank, a.global_address, a.global_dim, a.global_strides, a.box_dim,
        a.element_strides, a.interleave, a.swizzle, a.l2_promotion, a.oob_fill)


def emulate_box(args: TensorMapArguments, base: Any, coords: List[int]) -> Any:
    """The box at ``coords`` (innermost first) as the TMA unit reads it, out-of-bounds
    elements filled (zeros or NaN), outermost dim first: the interpreter's reference of a
    tensor-map load. ``base`` is the tensor as a NumPy array."""
    import numpy as np
    shape = list(reversed(args.global_dim))
    box = list(reversed(args.box_dim))
    start = list(reversed(coords))
    fill = np.nan if args.oob_fill == OOB_FILL_NAN else 0
    out = np.full(box, fill, dtype=base.dtype)
    src, dst = [], []
    for lo, extent, size in zip(start, box, shape):
        a, b = max(lo, 0), min(lo + extent, size)
        if a >= b:
            return out
        src.append(slice(a, b))
        dst.append(slice(a - lo, b - lo))
    out[tuple(dst)] = base[tuple(src)]
    return out


# Encoded maps by what they encode: (address, dtype, shape, strides, block, padding) ->
# (that key, 64-byte-aligned storage, its address). The 128 bytes are a pure function of
# the key, so a descriptor made afresh for every call (tessera.ops' attention makes them per
# call) finds its map here instead of paying the driver's encoding: 3 maps per attention
# call cost about 0.1 ms of host time before this cache (H200). Bounded, oldest dropped; a
# dropped entry's bytes stay alive while a descriptor holds them, and a launch copies its
# parameters, so nothing in flight reads freed memory.
_ENCODED: "OrderedDict[tuple, tuple]" = OrderedDict()
ENCODED_LIMIT = 1024


def host_address(desc: TensorDescriptor) -> int:
    """The host address of ``desc``'s encoded CUtensorMap, 64-byte aligned, for the launcher
    (which passes those 128 bytes as the kernel parameter). Encoded once per tensor, dtype,
    shape, strides, block and padding (kept on the descriptor and in a bounded table)."""
    base = desc.base
    key = (data_pointer(base), str(base.dtype), tuple(desc.shape), tuple(desc.strides),
           tuple(desc.block_shape), desc.padding)
    cached = desc.__dict__.get("_tensor_map")
    if cached is not None and cached[0] == key:
        return cached[2]
    cached = _ENCODED.get(key)
    if cached is None:
        import numpy as np
        storage = np.zeros(128 + 64, np.uint8)
        start = -storage.ctypes.data % 64
        storage[start:start + 128] = np.frombuffer(encode(desc), np.uint8)
        cached = (key, storage, storage.ctypes.data + start)
        _ENCODED[key] = cached
        while len(_ENCODED) > ENCODED_LIMIT:
            _ENCODED.popitem(last=False)
    else:
        _ENCODED.move_to_end(key)
    desc.__dict__["_tensor_map"] = cached
    return cached[2]
