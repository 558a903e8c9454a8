"""Calls of external device functions: ``tl.extern_elementwise``, ``core.extern`` (Triton's).

Triton's libdevice module and user-written wrappers both build on extern_elementwise: given
the arguments and a dispatch table ``{(dtype, ...): (symbol, result dtype)}``, it picks the
symbol for the arguments' dtypes (an exact match, no promotion), broadcasts the arguments to
one shape and emits one ``extern_elementwise`` IR op calling that symbol per element.
Codegen calls the symbol (linked from libdevice's bitcode, or from ``lib_path``); the
interpreter evaluates the symbols of the libdevice table (extra/libdevice_table.py).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Sequence, Tuple

from .core import builtin, dtype, tensor, _unwrap


def extern(fn: Callable) -> Callable:
    """Marks a function as an external-function wrapper (Triton's ``core.extern``): a builtin
    called with ``_semantic``. Example::

        @core.extern
        def my_tanh(arg0, _semantic=None):
            return core.extern_elementwise("", "", [arg0], {
                (core.dtype("fp32"),): ("__nv_tanhf", core.dtype("fp32"))},
                is_pure=True, _semantic=_semantic)
    """
    return builtin(fn)


def _describe(types: Sequence[Any]) -> str:
    return "(" + ", ".join(str(getattr(t, "name", t)) for t in types) + ")"


def _lookup(name: str, types: Tuple[dtype, ...], table: Dict[tuple, tuple]) -> Tuple[str, dtype]:
    """The (symbol, result dtype) of ``table`` for the argument dtypes ``types``."""
    for key, value in table.items():
        if tuple(key) == types:
            symbol, result = value
            return str(symbol), result
    accepted = " or ".join(_describe(key) for key in table)
    hint = ""
    if any(t.is_fp16() or t.is_bf16() for t in types):
        hint = "; fp16/bf16 are not accepted (as in Triton): cast to fp32 first, x.to(tl.float32)"
    raise TypeError(f"{name} takes argument dtypes {accepted}, got {_describe(types)}{hint}")


def build_extern_elementwise(semantic: Any, lib_name: str, lib_path: str, args: Sequence[Any],
                             table: Dict[tuple, tuple], is_pure: bool,
                             name: str = "extern_elementwise") -> tensor:
    """The IR of one extern call (Triton's dispatch): exact dtype match, then broadcast."""
    if not table:
        raise ValueError(f"{name}: arg_type_symbol_dict is empty")
    arity = len(next(iter(table)))
    if len(args) != arity:
        raise ValueError(f"{name} takes {arity} arguments, got {len(args)}")
    values = [semantic.to_tensor(_unwrap(a)) for a in args]
    for value in values:
        if value.dtype.is_ptr():
            raise TypeError(f"{name} does not take pointers, got {value.dtype}")
    symbol, result = _lookup(name, tuple(v.dtype for v in values), table)
    if not isinstance(result, dtype):
        raise TypeError(f"{name}: the result dtype of {symbol} must be a tl.dtype, got {result!r}")
    values = semantic.broadcast_values(*values) if values else []
    shape = list(values[0].shape) if values else []
    return semantic.create("extern_elementwise", values, result, shape, symbol=symbol,
                           pure=bool(is_pure), lib_name=str(lib_name), lib_path=str(lib_path))


@builtin
def extern_elementwise(lib_name: str, lib_path: str, args: list, arg_type_symbol_dict: dict,
                       is_pure: bool, _semantic=None) -> tensor:
    """Calls an external elementwise device function (Triton's ``tl.extern_elementwise``).

    ``arg_type_symbol_dict`` maps a tuple of argument dtypes to ``(symbol, result dtype)``;
    the arguments (tensors or Python numbers, which become int32 / fp32) must match one key
    exactly, and are broadcast to one shape. ``lib_path`` names a bitcode file to link (empty:
    libdevice). ``is_pure=False`` keeps every call (never merged, hoisted or removed).
    Example: ``y = tl.extern_elementwise("", "", [x], {(tl.float32,): ("__nv_tanhf",
    tl.float32)}, is_pure=True)``.
    """
    return build_extern_elementwise(_semantic, _unwrap(lib_name), _unwrap(lib_path),
                                    list(_unwrap(args)), _unwrap(arg_type_symbol_dict),
                                    bool(_unwrap(is_pure)))
