"""``tl.inline_asm_elementwise``: PTX inline assembly mapped over tensors, as Triton's.

The front end builds one ``inline_asm`` op per output (cpp/ir/ops.def); codegen
(cpp/codegen/lower_inline_asm.cpp) emits LLVM inline assembly over groups of ``pack``
elements. The interpreter cannot run PTX: a kernel using it fails there with an error naming
the kernel and line.
"""
from __future__ import annotations

from typing import Any, Sequence, Tuple, Union

from . import core as tl
from .core import builtin, dtype, tensor


def _unwrap(value: Any) -> Any:
    return value.value if isinstance(value, tl.constexpr) else value


@builtin
def inline_asm_elementwise(asm: str, constraints: str, args: Sequence[Any],
                           dtype: Union[dtype, Sequence[dtype]], is_pure: bool, pack: int,
                           _semantic=None) -> Union[tensor, Tuple[tensor, ...]]:
    """Runs the inline assembly ``asm`` elementwise over ``args`` (broadcast to one shape, their
    dtypes kept): each instance takes ``pack`` elements of every argument and gives ``pack``
    elements of every output. Operands and results are numbered ``$0, $1, ...`` as
    ``constraints`` (LLVM's syntax) lists them: outputs first, then inputs; elements narrower
    than 32 bits are packed into 32-bit registers (4 int8 or 2 float16 per register, at most
    ``pack``). ``dtype`` is the output's dtype, or a tuple of them for several outputs (a tuple
    of tensors is returned). ``is_pure=False`` keeps the asm where it is, as a side effect.
    Which elements share an instance is unspecified. GPU only: the interpreter cannot run PTX.

    Example (two float16 values per instance, in one 32-bit register each way)::

        y = tl.inline_asm_elementwise("neg.f16x2 $0, $1;", "=r,r", [x], dtype=tl.float16,
                                      is_pure=True, pack=2)
    """
    asm, constraints = _unwrap(asm), _unwrap(constraints)
    pack, is_pure = _unwrap(pack), _unwrap(is_pure)
    if not isinstance(asm, str) or not isinstance(constraints, str):
        raise TypeError("inline_asm_elementwise's asm and constraints must be constexpr strings")
    if not isinstance(pack, int) or isinstance(pack, bool) or pack < 1:
        raise ValueError(f"inline_asm_elementwise's pack must be a positive int, got {pack!r}")
    dtype = _unwrap(dtype)
    several = isinstance(dtype, (tuple, list))
    dtypes = [_unwrap(d) for d in dtype] if several else [dtype]
    if not dtypes:
        raise ValueError("inline_asm_elementwise needs at least one output dtype")
    for item in dtypes:
        if not isinstance(item, tl.dtype) or item.is_ptr():
            raise TypeError(f"inline_asm_elementwise's dtype must be a scalar dtype (or a tuple "
                            f"of them), got {item!r}")
    if several and len(dtypes) > 1 and not is_pure:
        raise ValueError("inline_asm_elementwise with is_pure=False and several outputs is not "
                         "supported (each output is its own asm call)")
    values = [_semantic.to_tensor(_unwrap(a)) for a in _unwrap(args)]
    if values:
        values = _semantic.broadcast_values(*values)
    shape = values[0].shape if values else []
    outputs = ",".join(tl.dtype._IR_NAMES[d.name] for d in dtypes)
    results = tuple(
        _semantic.create("inline_asm", values, d, shape, asm=asm, constraints=constraints,
                         pure=bool(is_pure), pack=pack, outputs=outputs, index=i)
        for i, d in enumerate(dtypes))
    return results if several else results[0]
