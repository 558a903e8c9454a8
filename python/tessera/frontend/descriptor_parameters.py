"""Kernel parameters given a host ``TensorDescriptor``: several block arguments, one value.

The signature types such a parameter ``tensordesc<fp16[64, 32]>``, a text defined here
(:func:`type_text`, :func:`parse_type`), which the launch writes (runtime/
descriptor_arguments.py says how it expands the argument). Its block arguments are the base
pointer, the shape (int32 each) and the strides (int64 each); in the body the parameter is a
``tl.tensor_descriptor``. What the host checked on creation is known here: the base is
16-byte aligned, the leading strides are multiples of 16 bytes (recorded in the func's
divisibility, for vector accesses) and the last stride is 1 (a constant in the body); shape
dims are specialized on divisibility by 16 as int arguments are.
"""
from __future__ import annotations

from typing import Any, List, Tuple

from ..device.tma import DATA_TYPES, copyable_block
from ..language import core as tl
from ..language.block_pointer import tensor_descriptor

PREFIX = "tensordesc<"


def type_text(key: tuple, dtype_code: str) -> str:
    """The signature text of a descriptor argument's specialization key
    (runtime/descriptor_arguments.py's ``key``) whose dtype has the type code ``dtype_code``."""
    block = ", ".join(str(b) for b in key[2])
    fields = (",nan" if key[3] == "nan" else "") + \
        (",div16=" + ".".join(str(i) for i in key[4]) if key[4] else "")
    return f"{PREFIX}{dtype_code}[{block}]{fields}>"


def is_descriptor_type(text: str) -> bool:
    return text.startswith(PREFIX)


def parse_type(text: str) -> Tuple[str, List[int], str, List[int]]:
    """(dtype code, block shape, padding, shape dims divisible by 16) of a type text."""
    inner = text[len(PREFIX):].rstrip(">")
    code, rest = inner.split("[", 1)
    block, rest = rest.split("]", 1)
    padding, div16 = "zero", []
    for field in filter(None, rest.split(",")):
        if field == "nan":
            padding = "nan"
        elif field.startswith("div16="):
            div16 = [int(i) for i in field[len("div16="):].split(".")]
        else:
            raise ValueError(f"unknown field '{field}' in the descriptor type '{text}'")
    return code, [int(b) for b in block.split(",")], padding, div16


def has_tensor_map(text: str) -> bool:
    """Whether a descriptor of this type passes a CUtensorMap when the kernel takes maps (a
    data type the TMA knows, a block the pipeliner copies: 2-D, or up to 5-D with leading
    dims of 1, at most 256 rows; device/tma.py): the front end's rule and the launcher's,
    read from the type text."""
    code, block, _, _ = parse_type(text)
    return code in DATA_TYPES and copyable_block(block)


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
        on sm_90a), for the descriptors whose blocks the pipeliner copies by TMA (see
        ``has_tensor_map``)."""
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
