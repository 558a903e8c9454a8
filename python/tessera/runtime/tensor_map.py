"""The arguments of ``cuTensorMapEncodeTiled`` for a host ``TensorDescriptor`` (TMA, sm_90a).

With ``TESSERA_TMA=1`` on sm_90a a descriptor argument also passes a ``CUtensorMap``: 128
opaque bytes the driver encodes from these arguments, which the kernel receives as a
64-byte-aligned ``__grid_constant__`` parameter and names in ``cp.async.bulk.tensor``.
Computing them is plain arithmetic (tested on the CPU); only the encoding call needs a GPU.

The driver orders dims innermost first (the reverse of the tensor's): ``global_dim[0]`` is the
contiguous dim. Strides are in bytes, one per dim but the innermost. The box is the block
shape, except that a swizzled box's inner extent is at most the swizzle span: a block whose
rows exceed 128 bytes is copied as several 128-byte-wide boxes, one per 128-byte column block
of the wgmma layout (layout/swizzled_shared.h, ``wgmmaSharedEncoding``). The swizzle is the
one wgmma reads: min(128, row bytes) (32, 64 or 128 bytes). Out-of-bounds elements of a box
are filled by the TMA unit: zeros, or NaN for ``padding="nan"``. Example::

    args = encode_arguments(TensorDescriptor.from_tensor(a, [128, 64]))
    args.box_dim  # [64, 128]: 64 fp16 (128 bytes) along K, 128 rows

A device-side ``tl.make_tensor_descriptor`` under TESSERA_TMA encodes its map in the kernel
(``tensormap_create``, language/device_tensor_map.py): its box, swizzle and element type come
from :func:`device_fields`, the same rule (:func:`box_and_swizzle`) and table
(``ELEMENT_TYPES``) as the host's, so both paths copy a block into the same shared layout.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Tuple

from ..tools.tensor_descriptor import TensorDescriptor, data_pointer
from ..type_codes import dtype_code

# By Tessera dtype code: (CUtensorMapDataType of cuda.h, for cuTensorMapEncodeTiled; the PTX
# `tensormap.replace .elemtype` code, for maps encoded on the device). The two enumerations
# part at 8: PTX numbers .f32.ftz 8, .f64 9, .bf16 10, where the driver has FLOAT64 8, BFLOAT16 9.
ELEMENT_TYPES = {"u8": (0, 0), "i8": (0, 0), "fp8e4nv": (0, 0), "fp8e5": (0, 0),
                 "u16": (1, 1), "i16": (1, 1), "u32": (2, 2), "i32": (3, 3), "u64": (4, 4),
                 "i64": (5, 5), "fp16": (6, 6), "fp32": (7, 7), "fp64": (8, 9),
                 "bf16": (9, 10)}
DATA_TYPES = {code: driver for code, (driver, _) in ELEMENT_TYPES.items()}
SWIZZLE_NONE, SWIZZLE_32B, SWIZZLE_64B, SWIZZLE_128B = 0, 1, 2, 3
SWIZZLE_BYTES = {SWIZZLE_NONE: 0, SWIZZLE_32B: 32, SWIZZLE_64B: 64, SWIZZLE_128B: 128}
INTERLEAVE_NONE = 0
L2_PROMOTION_128B = 2
OOB_FILL_ZERO, OOB_FILL_NAN = 0, 1  # NONE, NAN_REQUEST_ZERO_FMA
MAX_BOX = 256  # each box dim
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


def swizzle_for(row_bytes: int) -> int:
    """The swizzle mode wgmma reads for rows of ``row_bytes`` (the block's contiguous extent):
    the 32/64/128-byte mode spanning min(128, row bytes); none below 32 bytes."""
    span = min(128, row_bytes)
    return {32: SWIZZLE_32B, 64: SWIZZLE_64B, 128: SWIZZLE_128B}.get(span, SWIZZLE_NONE)


def boxes_per_block(desc: TensorDescriptor) -> int:
    """How many boxes one block load issues: one per 128-byte column block of a swizzled
    block whose rows exceed 128 bytes, else one."""
    row_bytes = desc.block_shape[-1] * desc.base.dtype.itemsize
    return max(1, row_bytes // 128) if row_bytes > 128 else 1


def box_and_swizzle(block_shape: List[int], itemsize: int) -> Tuple[List[int], int]:
    """(box dims innermost first, swizzle mode) of a block: the rule of host and device maps
    alike. ValueError where the TMA cannot copy such a box (the message names the limit)."""
    rank = len(block_shape)
    swizzle = swizzle_for(block_shape[-1] * itemsize) if rank >= 2 else SWIZZLE_NONE
    inner_box = block_shape[-1]
    if swizzle != SWIZZLE_NONE:
        inner_box = min(inner_box, SWIZZLE_BYTES[swizzle] // itemsize)
    box = [inner_box] + list(reversed(block_shape[:-1]))
    if any(b > MAX_BOX for b in box):
        raise ValueError(f"TMA: box dims are at most {MAX_BOX}, got {box} (innermost first) "
                         f"for block {block_shape}")
    if inner_box * itemsize % 16:
        raise ValueError(f"TMA: the box's inner extent must be a multiple of 16 bytes, got "
                         f"{inner_box * itemsize}")
    return box, swizzle


def device_fields(code: str, itemsize: int, block_shape: List[int],
                  padding: str) -> Dict[str, Any]:
    """The fields a kernel writes into a map it encodes itself (``tensormap_create``'s
    attributes, PTX's ``tensormap.replace`` values): box dims innermost first, the PTX element
    type, swizzle mode and fill mode. ValueError where the TMA cannot copy the block."""
    if code not in ELEMENT_TYPES:
        raise ValueError(f"TMA: no tensor-map data type for {code}")
    box, swizzle = box_and_swizzle(list(block_shape), itemsize)
    return {"box_dim": box, "elem_type": ELEMENT_TYPES[code][1], "swizzle_mode": swizzle,
            "fill_mode": OOB_FILL_NAN if padding == "nan" else OOB_FILL_ZERO}


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


def host_address(desc: TensorDescriptor) -> int:
    """The host address of ``desc``'s encoded CUtensorMap, 64-byte aligned, for the launcher
    (which passes those 128 bytes as the kernel parameter). Encoded once per descriptor and
    kept on it while its tensor, shape and block stay the same."""
    import numpy as np
    key = (data_pointer(desc.base), tuple(desc.shape), tuple(desc.strides),
           tuple(desc.block_shape), desc.padding)
    cached = desc.__dict__.get("_tensor_map")
    if cached is None or cached[0] != key:
        storage = np.zeros(128 + 64, np.uint8)
        start = -storage.ctypes.data % 64
        storage[start:start + 128] = np.frombuffer(encode(desc), np.uint8)
        cached = (key, storage, storage.ctypes.data + start)
        desc.__dict__["_tensor_map"] = cached
    return cached[2]
