"""Kernel parameters given a host ``TensorDescriptor``: several block arguments, one value.

The signature types such a parameter ``tensordesc<fp16[64, 32]>`` (runtime/
descriptor_arguments.py says how the launch expands it). Its block arguments are the base
pointer, the shape (int32 each) and the strides (int64 each); in the body the parameter is a
``tl.tensor_descriptor``. What the host checked on creation is known here: the base is
16-byte aligned, the leading strides are multiples of 16 bytes (recorded in the func's
divisibility, for vector accesses) and the last stride is 1 (a constant in the body); shape
dims are specialized on divisibility by 16 as int arguments are.
"""
from __future__ import annotations

from typing import Any, List, Tuple

from ..language import core as tl
from ..language.block_pointer import tensor_descriptor
from ..runtime.descriptor_arguments import has_tensor_map, is_descriptor_type, parse_type


class DescriptorParameter:
    """The type of a descriptor parameter: element dtype, block shape, padding."""

    def __init__(self, text: str) -> None:
        code, self.block_shape, self.padding, self.div16 = parse_type(text)
        self.text = text
        self.element = tl.str_to_ty(code)

    @staticmethod
    def parse(text: str) -> Any:
        """A DescriptorParameter for ``tensordesc<...>``, else None."""
        return DescriptorParameter(text) if is_descriptor_type(text) else None

    def has_tensor_map(self, tma: bool) -> bool:
        """Whether the parameter also passes a CUtensorMap: with TMA asked for (TESSERA_TMA
        on sm_90a), for the 2-D descriptors whose box the host can encode (a data type the
        TMA knows, at most 256 rows: runtime/tensor_map.py)."""
        return tma and has_tensor_map(self.text)  # the launcher's rule too

    def block_arguments(self, name: str, tma: bool = False) -> List[Tuple[str, tl.dtype, int]]:
        """(name, dtype, divisibility) of each block argument, in launch order; the tensor
        map (a 128-byte __grid_constant__ parameter, typed ptr<i8> in the IR) comes last."""
        rank = len(self.block_shape)
        stride_divisor = max(1, 16 // max(1, self.element.primitive_bitwidth // 8))
        return ([(f"{name}.base", tl.pointer_type(self.element), 16)]
                + [(f"{name}.shape[{i}]", tl.int32, 16 if i in self.div16 else 1)
                   for i in range(rank)]
                + [(f"{name}.strides[{i}]", tl.int64, stride_divisor if i < rank - 1 else 1)
                   for i in range(rank)]
                + ([(f"{name}.tensormap", tl.pointer_type(tl.int8), 1)]
                   if self.has_tensor_map(tma) else []))

    def value(self, handles: List[Any], semantic: Any) -> tensor_descriptor:
        rank = len(self.block_shape)
        base = tl.tensor(handles[0], tl.pointer_type(self.element))
        shape = [tl.tensor(h, tl.int32) for h in handles[1:1 + rank]]
        strides = [tl.tensor(h, tl.int64) for h in handles[1 + rank:1 + 2 * rank - 1]]
        strides.append(semantic.scalar_constant(1, tl.int64))
        desc = tensor_descriptor(base, shape, strides, self.block_shape, self.padding)
        if len(handles) > 1 + 2 * rank:  # its loads carry the tensor map (block_pointer_semantic)
            desc.tensormap = tl.tensor(handles[1 + 2 * rank], tl.pointer_type(tl.int8))
        return desc
