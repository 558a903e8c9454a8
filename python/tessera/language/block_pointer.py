"""Block pointers and tensor descriptors: structured values of the kernel language.

As Triton's ``tl.make_block_ptr`` / ``tl.advance`` and ``tl.make_tensor_descriptor``. Neither
is an IR type: the front end holds one as a Python object whose runtime parts are scalars (a
base pointer, int64 shape and strides, int32 offsets) and whose block shape and order are
compile-time values. A load or store through one becomes an ordinary ``load``/``store`` of a
tile of pointers with a mask built from aranges (block_pointer_semantic.py), as Triton's
RewriteTensorPointer pass does, so the interpreter and every target run them unchanged.
Through runtime ``if``/``for``/``while`` the parts travel as separate carried values
(``_flatten`` / ``_unflatten``, used by frontend/control_flow.py); parts a loop leaves
unchanged (base, shape, strides) are folded back to their initial values by canonicalize,
so the address tile is loop-invariant and only the offsets change per iteration.
"""
from __future__ import annotations

from typing import Any, List, Sequence, Tuple

from . import block_pointer_semantic as _bp
from .core import block_type, builtin, dtype, pointer_type, tensor


class _Structured:
    """A front-end value made of runtime scalars (``parts``) plus compile-time fields."""

    parts: List[tensor]

    def _flatten(self) -> List[tensor]:
        return list(self.parts)

    def _unflatten(self, parts: Sequence[tensor]) -> "_Structured":
        raise NotImplementedError

    def _type_key(self) -> Tuple[Any, ...]:
        """Equal for two values that may flow into one another (a loop's init and yield)."""
        return (type(self).__name__, tuple((p.dtype, tuple(p.shape)) for p in self.parts),
                *self._static())

    def _static(self) -> Tuple[Any, ...]:
        return ()

    def __bool__(self) -> bool:
        raise TypeError(f"the truth value of a {type(self).__name__} is not known at compile "
                        "time")


class block_pointer(_Structured):
    """A pointer to a ``block_shape`` block of a strided ``shape`` tensor at ``offsets``
    (``tl.make_block_ptr``'s result). ``order`` lists the dims from fastest-varying in memory
    (a hint, as in Triton). Load and store it with ``tl.load`` / ``tl.store``; move it with
    ``tl.advance(p, offsets)`` or ``p.advance(offsets)``."""

    def __init__(self, base: tensor, shape: Sequence[tensor], strides: Sequence[tensor],
                 offsets: Sequence[tensor], block_shape: Sequence[int],
                 order: Sequence[int]) -> None:
        self.base = base
        self.shape = list(shape)
        self.strides = list(strides)
        self.offsets = list(offsets)
        self.block_shape = [int(b) for b in block_shape]
        self.order = [int(o) for o in order]
        self.parts = [base, *self.shape, *self.strides, *self.offsets]

    @property
    def element_ty(self) -> dtype:
        return self.base.dtype.element_ty

    @property
    def type(self) -> pointer_type:
        """Triton's type of a block pointer: a pointer to the block
        (``pointer_type(block_type(element, block_shape))``); ``p.dtype.element_ty`` is that
        block type, and ``x.to(p.dtype.element_ty)`` casts to its element dtype."""
        return pointer_type(block_type(self.element_ty, self.block_shape))

    dtype = type

    def _static(self) -> Tuple[Any, ...]:
        return (tuple(self.block_shape), tuple(self.order))

    def _unflatten(self, parts: Sequence[tensor]) -> "block_pointer":
        n = len(self.block_shape)
        parts = list(parts)
        return block_pointer(parts[0], parts[1:1 + n], parts[1 + n:1 + 2 * n],
                             parts[1 + 2 * n:], self.block_shape, self.order)

    def __str__(self) -> str:
        return f"block_pointer<{self.element_ty}{self.block_shape}>"

    __repr__ = __str__

    @builtin
    def advance(self, offsets: Sequence[Any], _semantic=None) -> "block_pointer":
        """This block pointer moved by ``offsets`` elements, one per dim (it is a new value:
        assign it). Example: ``a_block = a_block.advance((0, BLOCK_K))``."""
        return _bp.advance(_semantic, self, offsets)


class tensor_descriptor(_Structured):
    """A strided tensor in global memory read and written in ``block_shape`` blocks
    (``tl.make_tensor_descriptor``'s result, or a kernel argument given a host-side
    ``tessera.tools.tensor_descriptor.TensorDescriptor``). ``shape`` (int32) and ``strides``
    (int64) are tuples of scalars; elements outside the tensor read as the padding (0, or NaN
    with ``padding_option="nan"``) and are never written."""

    def __init__(self, base: tensor, shape: Sequence[tensor], strides: Sequence[tensor],
                 block_shape: Sequence[int], padding: str = "zero") -> None:
        self.base = base
        self.shape = tuple(shape)
        self.strides = tuple(strides)
        self.block_shape = [int(b) for b in block_shape]
        self.padding = padding
        self.parts = [base, *self.shape, *self.strides]

    @property
    def dtype(self) -> dtype:
        return self.base.dtype.element_ty

    @property
    def block_type(self) -> block_type:
        return block_type(self.dtype, self.block_shape)

    def _static(self) -> Tuple[Any, ...]:
        return (tuple(self.block_shape), self.padding)

    def _unflatten(self, parts: Sequence[tensor]) -> "tensor_descriptor":
        n = len(self.block_shape)
        parts = list(parts)
        return tensor_descriptor(parts[0], parts[1:1 + n], parts[1 + n:], self.block_shape,
                                 self.padding)

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"tensor_descriptor has no attribute '{name}'")

    def __str__(self) -> str:
        return f"tensor_descriptor<{self.dtype}{self.block_shape}>"

    __repr__ = __str__

    @builtin
    def load(self, offsets: Sequence[Any], _semantic=None) -> tensor:
        """The block at element ``offsets`` (one per dim); elements outside the tensor read as
        the padding (0 by default). Example: ``a = a_desc.load([off_m, k])``."""
        return _bp.descriptor_load(_semantic, self, offsets)

    @builtin
    def store(self, offsets: Sequence[Any], value: tensor, _semantic=None) -> None:
        """Writes ``value`` (of the block shape, cast to the descriptor's dtype) at element
        ``offsets``; elements outside the tensor are not written.
        Example: ``c_desc.store([off_m, off_n], acc.to(tl.float16))``."""
        _bp.descriptor_store(_semantic, self, offsets, value)

    # Reductions into the tensor (Triton's descriptor atomics): relaxed, gpu scope, elements
    # outside the tensor untouched; they return nothing (Triton's void tensor: None here).

    @builtin
    def atomic_add(self, offsets: Sequence[Any], value: tensor, _semantic=None) -> None:
        """Adds ``value`` (of the block shape and the descriptor's dtype: int32, uint32,
        uint64, fp32, fp16 or bf16) into the block at element ``offsets``, atomically per
        element; elements outside the tensor are not touched. On sm_90a one TMA reduction
        (cp.reduce.async.bulk.tensor) where the rules allow (docs/perf/hopper.md).
        Example: ``dq_desc.atomic_add([off_m, 0], dq)``."""
        _bp.descriptor_atomic(_semantic, self, "add", offsets, value)

    @builtin
    def atomic_min(self, offsets: Sequence[Any], value: tensor, _semantic=None) -> None:
        """``min`` of the block at ``offsets`` and ``value``, per element (32/64-bit integers,
        fp16, bf16; as ``atomic_add``). Example: ``desc.atomic_min([m, n], x)``."""
        _bp.descriptor_atomic(_semantic, self, "min", offsets, value)

    @builtin
    def atomic_max(self, offsets: Sequence[Any], value: tensor, _semantic=None) -> None:
        """``max`` of the block at ``offsets`` and ``value``, per element (32/64-bit integers,
        fp16, bf16; as ``atomic_add``). Example: ``desc.atomic_max([m, n], x)``."""
        _bp.descriptor_atomic(_semantic, self, "max", offsets, value)

    @builtin
    def atomic_and(self, offsets: Sequence[Any], value: tensor, _semantic=None) -> None:
        """Bitwise ``and`` into the block at ``offsets`` (32/64-bit integers; as
        ``atomic_add``). Example: ``desc.atomic_and([m, n], bits)``."""
        _bp.descriptor_atomic(_semantic, self, "and", offsets, value)

    @builtin
    def atomic_or(self, offsets: Sequence[Any], value: tensor, _semantic=None) -> None:
        """Bitwise ``or`` into the block at ``offsets`` (32/64-bit integers; as
        ``atomic_add``). Example: ``desc.atomic_or([m, n], bits)``."""
        _bp.descriptor_atomic(_semantic, self, "or", offsets, value)

    @builtin
    def atomic_xor(self, offsets: Sequence[Any], value: tensor, _semantic=None) -> None:
        """Bitwise ``xor`` into the block at ``offsets`` (32/64-bit integers; as
        ``atomic_add``). Example: ``desc.atomic_xor([m, n], bits)``."""
        _bp.descriptor_atomic(_semantic, self, "xor", offsets, value)

    @builtin
    def gather(self, *args: Any, _semantic=None) -> tensor:
        """``desc.gather(x_offsets, y_offset)``: the rows ``x_offsets`` (a 1-D int tile of at
        least 8) of a 2-D descriptor with a ``[1, N]`` block, ``N`` columns from ``y_offset``;
        a ``[len(x_offsets), N]`` tile (outside the tensor: the padding), as Triton's TMA gather.
        Example: ``rows = desc.gather(tl.load(idx_ptr + tl.arange(0, 32)), col)``."""
        if len(args) != 2:
            raise ValueError(f"descriptor gather only supports 2D indexing, but got {len(args)}")
        return _bp.descriptor_gather(_semantic, self, args[0], args[1])

    @builtin
    def scatter(self, value: tensor, *args: Any, _semantic=None) -> None:
        """``desc.scatter(value, x_offsets, y_offset)``: writes the rows of ``value`` to rows
        ``x_offsets`` at columns ``y_offset`` .. ``y_offset + N`` (the inverse of
        :meth:`gather`; parts outside the tensor are not written).
        Example: ``desc.scatter(tile, row_ids, 0)``."""
        if len(args) != 2:
            raise ValueError(f"descriptor scatter only supports 2D indexing, but got {len(args)}")
        _bp.descriptor_scatter(_semantic, self, value, args[0], args[1])


@builtin
def make_block_ptr(base: tensor, shape: Sequence[Any], strides: Sequence[Any],
                   offsets: Sequence[Any], block_shape: Sequence[int], order: Sequence[int],
                   _semantic=None) -> block_pointer:
    """A pointer to the ``block_shape`` block at ``offsets`` of the ``shape`` tensor with
    ``strides`` (in elements) starting at ``base``; ``order`` (a permutation, fastest dim
    first) is a layout hint. Example::

        a_block = tl.make_block_ptr(a_ptr, shape=(M, K), strides=(stride_am, stride_ak),
                                    offsets=(pid_m * BLOCK_M, 0),
                                    block_shape=(BLOCK_M, BLOCK_K), order=(1, 0))
        a = tl.load(a_block, boundary_check=(0, 1), padding_option="zero")
    """
    return _bp.make_block_ptr(_semantic, base, shape, strides, offsets, block_shape, order)


@builtin
def advance(base: block_pointer, offsets: Sequence[Any], _semantic=None) -> block_pointer:
    """The block pointer ``base`` moved by ``offsets`` elements (a new value; the argument is
    unchanged). Example: ``a_block = tl.advance(a_block, (0, BLOCK_K))``."""
    if not isinstance(base, block_pointer):
        raise TypeError(f"advance needs a block pointer (tl.make_block_ptr), got {base}")
    return _bp.advance(_semantic, base, offsets)


@builtin
def make_tensor_descriptor(base: tensor, shape: Sequence[Any], strides: Sequence[Any],
                           block_shape: Sequence[int], padding_option: str = "zero",
                           _semantic=None) -> tensor_descriptor:
    """A descriptor of the ``shape`` tensor at ``base`` (1 to 5 dims, the last one contiguous:
    its stride must be the constant 1) read and written in ``block_shape`` blocks of at least
    16 bytes along the last dim. Tessera lowers its loads and stores to masked accesses and
    needs no global scratch (``tessera.set_allocator`` is accepted, never called). Example::

        desc = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1],
                                         block_shape=[BLOCK_M, BLOCK_N])
        x = desc.load([pid_m * BLOCK_M, pid_n * BLOCK_N])
    """
    return _bp.make_tensor_descriptor(_semantic, base, shape, strides, block_shape,
                                      padding_option)


@builtin
def load_tensor_descriptor(desc: tensor_descriptor, offsets: Sequence[Any],
                           _semantic=None) -> tensor:
    """``desc.load(offsets)``. Example: ``x = tl.load_tensor_descriptor(desc, [m, 0])``."""
    return _bp.descriptor_load(_semantic, _bp.check_descriptor(desc), offsets)


@builtin
def store_tensor_descriptor(desc: tensor_descriptor, offsets: Sequence[Any], value: tensor,
                            _semantic=None) -> None:
    """``desc.store(offsets, value)``.
    Example: ``tl.store_tensor_descriptor(desc, [m, 0], y)``."""
    _bp.descriptor_store(_semantic, _bp.check_descriptor(desc), offsets, value)
