"""The methods of ``tl.tensor``, generated from one table, as Triton's ``_tensor_member_fn``.

``x.sum(1)`` is ``tl.sum(x, 1)``: every name in ``TENSOR_METHODS`` is bound on the tensor
class as the language function of the same name (``x`` becomes its first argument). The table
lists Triton 3.6's member functions, plus ``sort`` (declared on Triton's tensor but left
unbound there). A name whose function the language does not define yet (``advance``, for
block pointers) is skipped until it exists, and ``missing_methods()`` says which. The
functions themselves check their arguments, so a method error names the method's function.

Operators (``+``, ``<``, ``~``, ...) and ``x.T`` are compiled by the front end directly; it
keeps the dunder names' meaning in ``OPERATOR_METHODS`` (the method Triton's tensor defines
for each operator) so ``x.__add__(y)`` in a kernel means ``x + y``.
"""
from __future__ import annotations

import sys
from typing import Any, Callable, Dict, List, Tuple

from .core import builtin, tensor

# Triton's member functions: those its core.py, standard.py and math.py mark with
# @_tensor_member_fn (and `sort`), each bound to the language function of the same name.
TENSOR_METHODS = (
    # shapes (core.py)
    "broadcast_to", "trans", "permute", "split", "view", "item", "reshape", "expand_dims",
    "cast",
    # memory and atomics (core.py)
    "store", "advance", "atomic_cas", "atomic_xchg", "atomic_add", "atomic_max", "atomic_min",
    "atomic_and", "atomic_or", "atomic_xor",
    # reductions, scans, gathers (core.py, standard.py)
    "reduce", "associative_scan", "histogram", "gather", "max", "argmax", "min", "argmin",
    "sum", "xor_sum", "reduce_or", "cumsum", "cumprod",
    # standard.py
    "cdiv", "sigmoid", "softmax", "ravel", "flip", "sort",
    # math.py
    "exp", "exp2", "log", "log2", "cos", "sin", "sqrt", "sqrt_rn", "rsqrt", "abs", "erf",
    "floor", "ceil",
)

# Attributes of a tensor in a kernel besides its methods and `.T` (the front end's transpose).
TENSOR_ATTRIBUTES = ("dtype", "shape", "type", "numel", "to")

# Operators: Triton's tensor dunder -> (how the Semantic computes it, reflected?). The front
# end compiles `a + b` as `a.__add__(b)` (or `b.__radd__(a)` when only b is a tensor), as
# Triton's code generator does, through this one table; explicit calls mean the same.
_ARITHMETIC = ("add", "sub", "mul", "truediv", "floordiv", "mod")
_BITWISE = {"and": "andi", "or": "ori", "xor": "xori", "lshift": "shli", "rshift": "shr"}
_COMPARISONS = ("gt", "ge", "lt", "le", "eq", "ne")
OPERATOR_METHODS: Dict[str, Tuple[str, bool]] = {
    **{f"__{op}__": (op, False) for op in (*_ARITHMETIC, *_BITWISE, *_COMPARISONS)},
    **{f"__r{op}__": (op, True) for op in (*_ARITHMETIC, *_BITWISE, *_COMPARISONS)},
    "logical_and": ("logical_and", False), "logical_or": ("logical_or", False),
}
# Unary ones: the Semantic method.
UNARY_OPERATOR_METHODS: Dict[str, str] = {"__neg__": "minus", "__invert__": "invert",
                                          "__not__": "logical_not"}
# Python itself uses these on every object (hashing, `in`, `==` of internal bookkeeping), so
# they are not overridden on the class: the front end routes the explicit calls instead.
NOT_ON_CLASS = ("__eq__", "__ne__", "__gt__", "__ge__", "__lt__", "__le__")

_installed: List[str] = []


def _language() -> Any:
    return sys.modules[__name__.rsplit(".", 1)[0]]


def missing_methods() -> List[str]:
    """The names of TENSOR_METHODS the language does not define (not bound)."""
    return [name for name in TENSOR_METHODS if not hasattr(_language(), name)]


def apply_operator(semantic: Any, name: str, x: tensor, *args: Any) -> tensor:
    """``x.<name>(*args)`` for an operator dunder or logical_and/or (see OPERATOR_METHODS):
    ``x`` is the tensor whose method runs, so for a reflected dunder it is the right operand
    (and, as Triton's, the dtype whose signedness picks an arithmetic or logical ``>>``)."""
    if name in UNARY_OPERATOR_METHODS:
        if args:
            raise TypeError(f"tensor.{name}() takes no arguments")
        return getattr(semantic, UNARY_OPERATOR_METHODS[name])(x)
    op, reflected = OPERATOR_METHODS[name]
    if len(args) != 1:
        raise TypeError(f"tensor.{name}() takes one argument, got {len(args)}")
    lhs, rhs = (args[0], x) if reflected else (x, args[0])
    if op in _COMPARISONS:
        return semantic.compare(op, lhs, rhs)
    if op == "rshift":
        return semantic.shr(lhs, rhs, signed=x.dtype.is_int_signed())
    if op in _BITWISE:
        return semantic.bitwise(_BITWISE[op], lhs, rhs)
    if op in ("logical_and", "logical_or"):
        return semantic.logical("andi" if op == "logical_and" else "ori", lhs, rhs)
    return getattr(semantic, op)(lhs, rhs)


def binary_operator(semantic: Any, name: str, lhs: Any, rhs: Any) -> tensor:
    """``lhs <op> rhs`` where at least one side is a tensor: ``lhs.__op__(rhs)``, else
    ``rhs.__rop__(lhs)`` (``name`` is the forward dunder, e.g. ``"__add__"``)."""
    if isinstance(lhs, tensor):
        return apply_operator(semantic, name, lhs, rhs)
    return apply_operator(semantic, "__r" + name[2:], rhs, lhs)


class BoundOperator:
    """``x.__lt__`` and the other comparison dunders, which stay off the class (see
    NOT_ON_CLASS): the front end returns this for the attribute and calls it as a builtin."""

    __tessera_builtin__ = True

    def __init__(self, value: tensor, name: str) -> None:
        self.value, self.name = value, name
        self.__name__ = name

    def __call__(self, *args: Any, _semantic=None) -> tensor:
        return apply_operator(_semantic, self.name, self.value, *args)


def _operator_method(name: str) -> Callable:
    def method(self: tensor, *args: Any, _semantic=None) -> tensor:
        return apply_operator(_semantic, name, self, *args)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``x.{name}(...)``: the operator's meaning (Triton's tensor.{name})."
    return builtin(method)


def install() -> None:
    """Binds every method of the tables that the language defines on ``tensor``."""
    language = _language()
    for name in TENSOR_METHODS:
        function = getattr(language, name, None)
        if function is not None:
            setattr(tensor, name, function)
            _installed.append(name)
    for name in (*OPERATOR_METHODS, *UNARY_OPERATOR_METHODS):
        if name not in NOT_ON_CLASS:
            setattr(tensor, name, _operator_method(name))


def is_operator_method(name: str) -> bool:
    return name in OPERATOR_METHODS or name in UNARY_OPERATOR_METHODS
