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
from typing import Any, Callable, Dict, List

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

# Operator dunders of Triton's tensor -> (the Semantic method, reflected?). The front end
# compiles the operators themselves; these make the explicit calls work the same way.
OPERATOR_METHODS: Dict[str, tuple] = {
    "__add__": ("add", False), "__radd__": ("add", True),
    "__sub__": ("sub", False), "__rsub__": ("sub", True),
    "__mul__": ("mul", False), "__rmul__": ("mul", True),
    "__truediv__": ("truediv", False), "__rtruediv__": ("truediv", True),
    "__floordiv__": ("floordiv", False), "__rfloordiv__": ("floordiv", True),
    "__mod__": ("mod", False), "__rmod__": ("mod", True),
    "__and__": ("and_", False), "__rand__": ("and_", True),
    "__or__": ("or_", False), "__ror__": ("or_", True),
    "__xor__": ("xor_", False), "__rxor__": ("xor_", True),
    "__lshift__": ("shl", False), "__rlshift__": ("shl", True),
    "__rshift__": ("shr_", False), "__rrshift__": ("shr_", True),
    "__gt__": ("gt", False), "__ge__": ("ge", False), "__lt__": ("lt", False),
    "__le__": ("le", False), "__eq__": ("eq", False), "__ne__": ("ne", False),
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
    """``x.<name>(*args)`` for an operator dunder or logical_and/or (see OPERATOR_METHODS)."""
    if name in UNARY_OPERATOR_METHODS:
        if args:
            raise TypeError(f"tensor.{name}() takes no arguments")
        return getattr(semantic, UNARY_OPERATOR_METHODS[name])(x)
    method, reflected = OPERATOR_METHODS[name]
    if len(args) != 1:
        raise TypeError(f"tensor.{name}() takes one argument, got {len(args)}")
    other = args[0]
    lhs, rhs = (other, x) if reflected else (x, other)
    if method in ("gt", "ge", "lt", "le", "eq", "ne"):
        return semantic.compare(method, lhs, rhs)
    if method in ("and_", "or_", "xor_", "shl"):
        return semantic.bitwise({"and_": "andi", "or_": "ori", "xor_": "xori",
                                 "shl": "shli"}[method], lhs, rhs)
    if method == "shr_":
        shifted = lhs if isinstance(lhs, tensor) else semantic.to_tensor(lhs)
        return semantic.shr(lhs, rhs, signed=shifted.dtype.is_int_signed())
    if method in ("logical_and", "logical_or"):
        return semantic.logical("andi" if method == "logical_and" else "ori", lhs, rhs)
    return getattr(semantic, method)(lhs, rhs)


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
