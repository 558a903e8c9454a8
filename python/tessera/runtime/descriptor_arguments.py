"""Host tensor descriptors as kernel arguments: their specialization and their expansion.

A ``TensorDescriptor`` argument is one parameter of the kernel but several of the compiled
function: its base pointer, then its shape (int32 each), then its strides (int64 each), in
that order (as Triton's non-TMA launch). The specialization (``key`` / ``type_text``) is
the dtype, block shape, padding and which shape dims are multiples of 16 (as int arguments
are specialized: it lets the bounds masks of a load allow vector accesses), written
``tensordesc<fp16[64, 32]>``, with ``,nan`` for NaN padding and ``,div16=0.1`` for the dims
divisible by 16 before the ``>``: a format the front end defines, and reads back to build the
``tl.tensor_descriptor`` from the expanded parameters (frontend/descriptor_parameters.py).
The C++ fast launch path (cpp/bindings/python_specialize.h) computes the same key and
expansion itself (registered below, with tensor_map.host_address for the maps): a launch with
descriptors takes the Python path only the first time, or where the fast path cannot read a
descriptor (e.g. a base it does not read as a plain pointer argument either).
"""
from __future__ import annotations

from typing import Any, List, Sequence, Tuple

from ..frontend.descriptor_parameters import (  # noqa: F401  (the type text, re-exported)
    PREFIX,
    has_tensor_map,
    is_descriptor_type,
    parse_type,
    type_text,
)
from .._tessera import runtime as _runtime
from . import tensor_map
from ..tools.tensor_descriptor import TensorDescriptor
from ..type_codes import dtype_code

def key(desc: TensorDescriptor) -> tuple:
    """The specialization key of a descriptor argument (alignment is checked on creation)."""
    return ("tensordesc", desc.base.dtype, tuple(desc.block_shape), desc.padding,
            tuple(i for i, size in enumerate(desc.shape) if size % 16 == 0))


def launch_kinds(names: Sequence[str], signature: dict, kind_of,
                 tensor_maps: bool = False) -> List[str]:
    """The launcher's parameter kinds, a descriptor expanded (``kind_of`` maps the rest);
    ``tensor_maps``: the kernel takes the CUtensorMap of each descriptor the TMA copies too
    (TESSERA_TMA: ``has_tensor_map``)."""
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


def expansion(names: Sequence[str], signature: dict, tensor_maps: bool) -> Tuple[Any, ...]:
    """How a compiled kernel's launches expand their arguments, from its signature (known
    once, when it is loaded): per parameter None (passed as is), else whether the descriptor
    also passes its CUtensorMap. :func:`expand` then does per launch what :func:`flatten`
    does without re-deriving the type texts (that cost about 0.1 ms of host time per
    attention call)."""
    plan: List[Any] = []
    for name in names:
        text = signature.get(name, "")
        plan.append(bool(tensor_maps and has_tensor_map(text)) if is_descriptor_type(text)
                    else None)
    return tuple(plan)


def expand(plan: Sequence[Any], values: Sequence[Any]) -> List[Any]:
    """``values`` with each descriptor expanded as :func:`expansion`'s ``plan`` says: base,
    shape, strides, then its map's host address where it passes one."""
    out: List[Any] = []
    for with_map, value in zip(plan, values, strict=True):
        if with_map is None:
            out.append(value)
            continue
        out.append(value.base)
        out.extend(value.shape)
        out.extend(value.strides)
        if with_map:
            out.append(tensor_map.host_address(value))
    return out


# The fast path expands descriptors itself and takes each map's address from here.
_runtime.set_descriptor_support(TensorDescriptor, tensor_map.host_address)


def flatten(names: Sequence[str], values: Sequence[Any],
            tensor_maps: bool = False) -> Tuple[List[str], List[Any]]:
    """Names and values with each descriptor expanded into base, shape and strides, and with
    ``tensor_maps`` the CUtensorMap of each one the TMA copies (the host address of its encoded
    bytes): :func:`expand` with a plan read from the values themselves."""
    if not any(isinstance(v, TensorDescriptor) for v in values):
        return list(names), list(values)
    plan = tuple(
        (tensor_maps and has_tensor_map(type_text(key(v), dtype_code(v.base.dtype))))
        if isinstance(v, TensorDescriptor) else None for v in values)
    out_names: List[str] = []
    for with_map, name, value in zip(plan, names, values, strict=True):
        if with_map is None:
            out_names.append(name)
            continue
        rank = len(value.shape)
        out_names += [f"{name}.base"] + [f"{name}.shape[{i}]" for i in range(rank)] \
            + [f"{name}.strides[{i}]" for i in range(rank)]
        out_names += [f"{name}.tensormap"] if with_map else []
    return out_names, expand(plan, values)
