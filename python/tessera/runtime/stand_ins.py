"""Arguments given by their type, to compile a kernel for without a tensor: ``MockTensor``
(Triton's ``triton.runtime.jit.MockTensor`` / ``triton.MockTensor``) and the stand-ins
``kernel.warmup(...)`` makes of dtypes and type strings (``stand_in``).

Each is specialized through its own ``specialization_key`` (specialization.py dispatches on
``__tessera_stand_in__``) as a real argument of that type would be. Example::

    compiled = kernel.warmup(MockTensor(torch.float16), "i32", BLOCK=128, grid=(1,))
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

from ..type_codes import dtype_code
from .specialization import spans_2_31

_SCALAR_CODES = {"i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "fp16", "bf16",
                 "fp32", "fp64"}


class MockTensor:
    """A tensor of ``dtype`` that exists only to be specialized on (as ``triton.MockTensor``):
    16-byte aligned, address 0. Example: ``kernel.warmup(MockTensor(torch.float16), ...)``."""

    __tessera_stand_in__ = True

    def __init__(self, dtype: Any, shape: Optional[Sequence[int]] = None) -> None:
        self.dtype = dtype
        self.shape = list(shape) if shape is not None else [1]

    @staticmethod
    def wrap_dtype(arg: Any) -> Any:
        """A torch dtype becomes a MockTensor of it; anything else is returned unchanged."""
        if type(arg).__name__ == "dtype" and type(arg).__module__ == "torch":
            return MockTensor(arg)
        return arg

    def stride(self) -> tuple:
        strides = [1]
        for size in self.shape[1:]:
            strides.append(strides[-1] * size)
        return tuple(reversed(strides))

    @staticmethod
    def data_ptr() -> int:
        return 0

    def specialization_key(self) -> tuple:
        # Its shape counts as a tensor's would: a stand-in of 2**31 elements or more compiles
        # the kernel with int64 offsets, as a real tensor of that shape would launch it.
        return ("typed", "*" + _dtype_string(self.dtype), True,
                spans_2_31(self.shape, self.stride()))


class TypedStandIn:
    """An argument given by its type string ("i32", "fp32", "*fp16"): the kernel is compiled
    for that type, with no value specialization."""

    __tessera_stand_in__ = True

    def __init__(self, code: str) -> None:
        self.code = code

    def specialization_key(self) -> tuple:
        return ("typed", self.code, self.code.startswith("*"), False)

    def __repr__(self) -> str:
        return f"TypedStandIn({self.code!r})"


def _dtype_string(dtype: Any) -> str:
    from ..language import core as tl
    if isinstance(dtype, tl.dtype):
        return dtype.name
    if isinstance(dtype, str):
        return dtype
    return dtype_code(dtype)


def stand_in(arg: Any) -> Any:
    """The warmup stand-in of one argument (see the module docstring)."""
    from ..language import core as tl
    if isinstance(arg, tuple) and not isinstance(arg, tl.constexpr):  # a tuple argument
        items = [stand_in(item) for item in arg]
        return arg._make(items) if hasattr(arg, "_make") else type(arg)(items)
    if isinstance(arg, str):
        code = arg.strip()
        if code.lstrip("*") not in _SCALAR_CODES and not code.startswith("*"):
            return arg  # a constexpr string value
        return TypedStandIn(code)
    if isinstance(arg, tl.dtype):
        return MockTensor(arg)
    import numpy as np
    if isinstance(arg, np.dtype) or (type(arg).__name__ == "dtype" and
                                     type(arg).__module__.split(".", 1)[0] == "torch"):
        return MockTensor(arg)
    return arg
