"""``kernel.warmup(...)``: compile a kernel for given argument types without launching it, as
Triton's ``JITFunction.warmup``; and ``MockTensor``, the stand-in for a tensor of a dtype.

Arguments may be real tensors, or stand-ins: a torch / NumPy dtype, a ``tl.dtype`` or a
:class:`MockTensor` mean "a 16-byte-aligned tensor of that dtype"; a type string ("*fp32",
"i32", "fp16") means an argument of that type. The result is the CompiledKernel (``name``,
``asm``, ``metadata``, ``n_regs``, ``n_spills``); its cubin goes to the disk cache, so that a
later launch with the same specialization loads it instead of compiling.

Example::

    compiled = add_kernel.warmup(torch.float32, torch.float32, torch.float32, 1000,
                                 BLOCK=1024, grid=(1,))
    assert compiled.n_spills == 0
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

from .runtime.specialization import spans_2_31
from .type_codes import dtype_code

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
    from .language import core as tl
    if isinstance(dtype, tl.dtype):
        return dtype.name
    if isinstance(dtype, str):
        return dtype
    return dtype_code(dtype)


def stand_in(arg: Any) -> Any:
    """The warmup stand-in of one argument (see the module docstring)."""
    from .language import core as tl
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


def warmup_kernel(jit_fn, keys, constexprs, options):
    """Compiles one specialization of ``jit_fn`` (see the module docstring); None in interpret
    mode, as Triton's interpreter (there is nothing to compile)."""
    from .config import knobs
    from .runtime import launcher
    interpret = knobs.interpret if jit_fn.interpret is None else jit_fn.interpret
    if interpret:
        return None
    specialization = jit_fn._specialization(keys)
    compile_options = options.compile_options(launcher.default_arch())
    constexpr_dict = jit_fn._constexpr_dict(constexprs, keys)

    def compile_one():
        return launcher.compile_and_store(jit_fn, specialization, constexpr_dict,
                                          compile_options)

    from .host_api import active_mode
    mode = active_mode.get()
    if mode is not None:  # AsyncCompileMode: compile in its executor, return a FutureKernel
        return mode.submit((id(jit_fn), keys, constexprs, compile_options), compile_one,
                           lambda kernel: None)  # compile_and_store cached it on disk
    return compile_one()
