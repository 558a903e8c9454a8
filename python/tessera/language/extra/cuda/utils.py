"""``tl.extra.cuda``'s device queries: ``num_warps()`` / ``num_threads()`` (compile-time, from
the launch options) and ``globaltimer()`` / ``smid()`` (PTX special registers, read through
inline assembly as Triton does, so the interpreter cannot run them, as Triton's cannot).

Example::

    from tessera.language.extra import cuda

    @tessera.jit
    def kernel(out_ptr):
        start = cuda.globaltimer()
        tl.store(out_ptr + tl.program_id(0), cuda.smid())
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

from ... import core
from ...inline_asm import inline_asm_elementwise
from ....constexpr_functions import constexpr_function

_NUM_WARPS: contextvars.ContextVar[int] = contextvars.ContextVar("tessera_num_warps", default=4)


@contextlib.contextmanager
def compiling_with_warps(num_warps: int) -> Iterator[None]:
    """While the front end builds a kernel launched with ``num_warps`` warps per program."""
    token = _NUM_WARPS.set(int(num_warps))
    try:
        yield
    finally:
        _NUM_WARPS.reset(token)


@constexpr_function
def num_warps() -> int:
    """The kernel's ``num_warps`` launch option, a compile-time constant.

    Example: ``acc = tl.zeros([cuda.num_warps() * 32], tl.float32)``
    """
    return _NUM_WARPS.get()


@constexpr_function
def num_threads() -> int:
    """Threads per program: ``num_warps() * 32``, a compile-time constant.

    Example: ``offs = tl.arange(0, cuda.num_threads())``
    """
    return _NUM_WARPS.get() * 32


@core.builtin
def globaltimer(_semantic=None) -> core.tensor:
    """The GPU's global nanosecond timer (PTX ``%globaltimer``) as an int64 scalar; not pure,
    so each call reads it anew. GPU only.

    Example: ``t0 = cuda.globaltimer(); ...; elapsed = cuda.globaltimer() - t0``
    """
    value = inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=core.int64,
                                   is_pure=False, pack=1, _semantic=_semantic)
    assert isinstance(value, core.tensor)  # one output dtype: one tensor
    return value


@core.builtin
def smid(_semantic=None) -> core.tensor:
    """The id of the streaming multiprocessor running this program (PTX ``%smid``), an int32
    scalar. GPU only.

    Example: ``tl.store(sm_ptr + tl.program_id(0), cuda.smid())``
    """
    value = inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=core.int32,
                                   is_pure=True, pack=1, _semantic=_semantic)
    assert isinstance(value, core.tensor)  # one output dtype: one tensor
    return value
