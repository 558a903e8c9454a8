"""Host tensor descriptors as kernel arguments: their specialization and their expansion.

A ``TensorDescriptor`` argument is one parameter of the kernel but several of the compiled
function: its base pointer, then its shape (int32 each), then its strides (int64 each), in
that order (as Triton's non-TMA launch). The specialization (``key`` / ``type_text``) is
the dtype, block shape, padding and which shape dims are multiples of 16 (as int arguments
are specialized: it lets the bounds masks of a load allow vector accesses), written
``tensordesc<fp16[64, 32]>``, with ``,nan`` for NaN padding and ``,div16=0.1`` for the dims
divisible by 16 before the ``>``; the front end (frontend/descriptor_parameters.py) reads that
text back and builds the ``tl.tensor_descriptor`` from the expanded parameters. The C++ fast
launch path does not know descriptors: a launch with one always takes the Python path.
"""
from __future__ import annotations

from typing import Any, List, Sequence, Tuple

from ..type_codes import dtype_code
from ..tools.tensor_descriptor import TensorDescriptor

PREFIX = "tensordesc<"


def key(desc: TensorDescriptor) -> tuple:
    """The specialization key of a descriptor argument (alignment is checked on creation)."""
    return ("tensordesc", desc.base.dtype, tuple(desc.block_shape), desc.padding,
            tuple(i for i, size in enumerate(desc.shape) if size % 16 == 0))


def type_text(key: tuple, dtype_code: str) -> str:
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
    """Whether a descriptor of this type passes a CUtensorMap when the kernel takes maps:
    the front end's rule (frontend/descriptor_parameters.py), read from the type text."""
    from .tensor_map import DATA_TYPES, MAX_BOX
    code, block, _, _ = parse_type(text)
    return len(block) == 2 and code in DATA_TYPES and block[0] <= MAX_BOX


def launch_kinds(names: Sequence[str], signature: dict, kind_of,
                 tensor_maps: bool = False) -> List[str]:
    """The launcher's parameter kinds, a descriptor expanded (``kind_of`` maps the rest);
    ``tensor_maps``: the kernel takes each 2-D descriptor's CUtensorMap too (TESSERA_TMA)."""
    kinds: List[str] = []
    for name in names:
        text = signature[name]
        if is_descriptor_type(text):
            rank = len(parse_type(text)[1])
            kinds += ["ptr"] + ["i32"] * rank + ["i64"] * rank
            kinds += ["tensormap"] if tensor_maps and has_tensor_map(text) else []
        else:
            kinds.append(kind_of(text))
    return kinds


def flatten(names: Sequence[str], values: Sequence[Any],
            tensor_maps: bool = False) -> Tuple[List[str], List[Any]]:
    """Names and values with each descriptor expanded into base, shape and strides, and with
    ``tensor_maps`` a 2-D one's CUtensorMap (the host address of its encoded bytes)."""
    if not any(isinstance(v, TensorDescriptor) for v in values):
        return list(names), list(values)
    out_names: List[str] = []
    out_values: List[Any] = []
    for name, value in zip(names, values, strict=True):
        if isinstance(value, TensorDescriptor):
            rank = len(value.shape)
            out_names += [f"{name}.base"] + [f"{name}.shape[{i}]" for i in range(rank)] \
                + [f"{name}.strides[{i}]" for i in range(rank)]
            out_values += [value.base, *value.shape, *value.strides]
            text = type_text(key(value), dtype_code(value.base.dtype)) if tensor_maps else ""
            if tensor_maps and has_tensor_map(text):
                from .tensor_map import host_address
                out_names.append(f"{name}.tensormap")
                out_values.append(host_address(value))
        else:
            out_names.append(name)
            out_values.append(value)
    return out_names, out_values
