"""The TMA's tensor-map rules (sm_90a): element types, the box and its swizzle, fill modes.

One rule for both kinds of map, so that both copy a block into the same shared layout: the
maps the host encodes for a ``TensorDescriptor`` argument (runtime/tensor_map.py, through the
driver's ``cuTensorMapEncodeTiled``) and those a kernel encodes itself for a device-side
``tl.make_tensor_descriptor`` (language/device_tensor_map.py, ``tensormap_create``); the
front end and the launcher read from it which descriptors pass a map at all
(frontend/descriptor_parameters.py, ``has_tensor_map``).

Dims are innermost first (the driver's order). The box is the block shape, except that a
swizzled box's inner extent is at most the swizzle span: a block whose rows exceed 128 bytes
is copied as several 128-byte-wide boxes, one per 128-byte column block of the wgmma layout
(layout/swizzled_shared.h, ``wgmmaSharedEncoding``). The swizzle is the one wgmma reads:
min(128, row bytes) (32, 64 or 128 bytes). Example::

    box, swizzle = box_and_swizzle([128, 64], 2)   # fp16: ([64, 128], SWIZZLE_128B)
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

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
OOB_FILL_ZERO, OOB_FILL_NAN = 0, 1  # NONE, NAN_REQUEST_ZERO_FMA
MAX_BOX = 256  # each box dim


def copyable_block(block_shape: List[int]) -> bool:
    """Whether the pipeliner copies loads of blocks of this shape with the TMA: rank 2 to 5,
    every dim but the last two of size 1 (a 2-D tile in shared memory, as Triton's
    ``[1, BLOCK, D]`` blocks reshaped by the kernel), at most 256 rows. The rule of host maps
    (frontend/descriptor_parameters.py) and device maps (language/device_tensor_map.py)."""
    return (2 <= len(block_shape) <= 5 and all(b == 1 for b in block_shape[:-2])
            and block_shape[-2] <= MAX_BOX)


def swizzle_for(row_bytes: int) -> int:
    """The swizzle mode wgmma reads for rows of ``row_bytes`` (the block's contiguous extent):
    the 32/64/128-byte mode spanning min(128, row bytes); none below 32 bytes."""
    span = min(128, row_bytes)
    return {32: SWIZZLE_32B, 64: SWIZZLE_64B, 128: SWIZZLE_128B}.get(span, SWIZZLE_NONE)


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
