"""Device-side tensor descriptors copied by the TMA (TESSERA_TMA on sm_90a), as Triton does.

``tl.make_tensor_descriptor`` inside a kernel keeps its meaning (its loads and stores are
masked accesses, block_pointer_semantic.py), and under TMA also encodes a tensor map in the
kernel: 128 bytes of the kernel's global scratch (``global_scratch``: each program's part of
the buffer the launcher allocates through ``tessera.set_allocator``, Triton's rule), written
by ``tensormap_create`` (codegen/lower_tensormap.cpp: tensormap.replace and the tensor-map
proxy fences). Its loads then carry that map as a host descriptor's carry its kernel
parameter, and the pipeliner copies them with the same TMA plan (transforms/pipeline/tma.h).
The box, swizzle and element type follow the TMA's rules (device/tma.py, ``device_fields``),
which host maps (runtime/tensor_map.py) follow too, so both copy a block into the same shared
layout. A map no TMA copy
ends up using is erased with its scratch (transforms/pipeline/device_tensor_maps.h): such a
kernel needs no allocator.

Like Triton's, such a descriptor needs what the TMA needs at run time: a 16-byte aligned base
and row strides of multiples of 16 bytes (the interpreter checks both).
"""
from __future__ import annotations

from typing import Any, Dict

from ..device.tma import ELEMENT_TYPES, copyable_block, device_fields
from . import core as tl

MAP_BYTES = 128  # a CUtensorMap, 128-byte aligned in the scratch (as Triton's)

_CODES: Dict[Any, str] = {}


def _code(element: tl.dtype) -> str:
    """The dtype code (the keys of the TMA's element types) of ``element``, "" if none."""
    if not _CODES:
        _CODES.update({tl.str_to_ty(code): code for code in ELEMENT_TYPES})
    return _CODES.get(element, "")


def attach(sem: Any, desc: Any) -> None:
    """With TMA asked for, encodes ``desc``'s map in the kernel and gives it to ``desc`` (its
    loads carry it); a descriptor the TMA cannot copy (a block not 2-D after its leading dims
    of 1: ``copyable_block``, no TMA data type, a box over the limits) stays what it is
    without."""
    if not getattr(sem, "tma", False) or getattr(sem, "interpreter", False):
        return
    if not copyable_block(desc.block_shape):
        return
    try:
        fields = device_fields(_code(desc.dtype), desc.dtype.primitive_bitwidth // 8,
                               desc.block_shape, desc.padding)
    except ValueError:
        return
    offset = getattr(sem, "global_scratch_bytes", 0)
    sem.global_scratch_bytes = offset + MAP_BYTES
    map_type = tl.pointer_type(tl.int8)
    scratch = sem.builder.create("global_scratch", [], [map_type.to_ir()], {"offset": offset})
    operands = ([scratch.result(0), desc.base.handle] + [d.handle for d in desc.shape]
                + [s.handle for s in desc.strides[:-1]])
    create = sem.builder.create("tensormap_create", operands, [map_type.to_ir()], fields)
    desc.tensormap = tl.tensor(create.result(0), map_type)
