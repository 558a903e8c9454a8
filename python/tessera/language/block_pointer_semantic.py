"""Type rules and IR of block pointers and tensor descriptors (API: block_pointer.py).

A load or store through either becomes one ``load``/``store`` of a tile of pointers, with a
mask where bounds are checked, as Triton's RewriteTensorPointer pass does:

    pointer = (base + sum_d offset_d * stride_d) + arange_0 * stride_0 + arange_1 * stride_1 ...
              (each term along its own dim, broadcast by the adds)
    mask    = and over checked d of broadcast(0 <= offset_d + arange_d < shape_d)

(each bounds check is one unsigned compare).

Address arithmetic is in int64 (shapes and strides are int64 as in Triton, offsets int32). The
scalar part carries the offsets, so inside a loop that advances the pointer only a scalar
changes: the 1-D ``arange * stride`` parts depend on the strides alone and are hoisted by licm;
a stride that is the constant 1 folds away and leaves the tile contiguous along that dim, which
axis info turns into vector accesses. Descriptor loads, stores and reductions (the masked
``atomic_rmw`` of ``desc.atomic_add`` ...) carry the attribute ``tensor_descriptor = true``;
they are built by ``descriptor_load`` / ``descriptor_store`` / ``descriptor_atomic`` below.
Under TESSERA_TMA (sm_90a), a load through a descriptor's tensor map (a host descriptor's
kernel parameter, or the map a device descriptor encodes: device_tensor_map.py) also carries
the map and the box's coordinates (attribute ``tma``), for the pipeliner's TMA copies; so do
stores under TESSERA_TMA_STORE and reductions under TESSERA_TMA_REDUCE, for codegen's.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from . import block_pointer as _api
from . import device_tensor_map as _device_tensor_map
from . import core as tl
from .core import tensor

# The attribute marking the load/store ops of tensor descriptors.
DESCRIPTOR_ATTR = "tensor_descriptor"


def _as_list(values: Any) -> List[Any]:
    values = tl._unwrap(values)
    if isinstance(values, (list, tuple)):
        return [tl._unwrap(v) for v in values]
    return [values]


def _scalar(sem: Any, value: Any, ty: tl.dtype, what: str) -> tensor:
    """A scalar of integer type ``ty`` from a constexpr int or an integer scalar."""
    if isinstance(value, bool) or not isinstance(value, (int, tensor)):
        raise TypeError(f"{what} must be an integer (a constexpr or a runtime scalar), got "
                        f"{value!r}")
    if isinstance(value, int):
        bits = ty.int_bitwidth
        if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
            raise ValueError(f"{what} {value} does not fit in {ty}")
        return sem.scalar_constant(value, ty)
    if value.shape or not value.dtype.is_int():
        raise TypeError(f"{what} must be an integer scalar, got {value}")
    if ty == tl.int32 and value.dtype.int_bitwidth == 64:
        raise TypeError(f"{what} must be a 32-bit integer, got {value} (block offsets are "
                        "int32, as in Triton: add .to(tl.int32))")
    if value.dtype.int_bitwidth != ty.int_bitwidth:  # widen by the value's own signedness
        wide = tl.dtype(("int" if value.dtype.is_int_signed() else "uint")
                        + str(ty.int_bitwidth))
        value = sem.cast(value, wide)
    return tl.tensor(value.handle, ty, [])


def _scalars(sem: Any, values: Any, ty: tl.dtype, what: str) -> List[tensor]:
    return [_scalar(sem, v, ty, f"{what}[{i}]") for i, v in enumerate(_as_list(values))]


def _int_range(sem: Any, size: int) -> tensor:
    return sem.cast(sem.arange(0, size), tl.int64)


def _along(sem: Any, row: tensor, dim: int, rank: int) -> tensor:
    """A 1-D tile placed along ``dim`` of a rank-``rank`` tile (size 1 elsewhere)."""
    for axis in range(rank):
        if axis != dim:
            row = sem.expand_dims(row, axis)
    return row


def _unsigned(value: tensor) -> tensor:
    return tl.tensor(value.handle, tl.uint64, value.shape)


def _base_pointer(sem: Any, base: Any, what: str) -> tensor:
    if not isinstance(base, tensor) or base.shape or not base.dtype.is_ptr():
        raise TypeError(f"{what}'s base must be a scalar pointer (a pointer argument), got "
                        f"{base}")
    return base


def materialize(sem: Any, base: tensor, shape: Sequence[tensor], strides: Sequence[tensor],
                offsets: Sequence[tensor], block_shape: Sequence[int],
                checked: Sequence[int], collapsed: int = 0) -> Tuple[tensor, Optional[tensor]]:
    """The tile of pointers of the block and its mask (None when no dim is checked). The
    leading ``collapsed`` dims (block size 1 each) are left out of the tile: their offsets
    only move the start, and their bounds checks are scalars splat over the tile."""
    tile_shape = list(block_shape[collapsed:])
    rank = len(tile_shape)
    delta: Optional[tensor] = None
    for offset, stride in zip(offsets, strides, strict=True):
        term = sem.mul(sem.cast(offset, tl.int64), stride)
        delta = term if delta is None else sem.add(delta, term)
    # The scalar start joins the first dim's 1-D offsets before the tile is formed: only the
    # 1-D `arange * stride` parts are loop-invariant (hoisted, few registers), while the 2-D
    # pointer tile is rebuilt from the moving start where it is used, as in hand-written code.
    pointer = sem.add(base, delta)
    for dim in range(collapsed, len(block_shape)):
        part = sem.mul(_int_range(sem, block_shape[dim]), strides[dim])
        pointer = sem.add(pointer, _along(sem, part, dim - collapsed, rank))
    pointer = sem.broadcast_to(pointer, tile_shape)
    mask: Optional[tensor] = None
    outer: Optional[tensor] = None  # the collapsed dims' checks, scalar
    for dim in checked:
        index = sem.cast(offsets[dim], tl.int64)
        if dim >= collapsed:
            index = sem.add(_int_range(sem, block_shape[dim]), index)
        # 0 <= index < shape in one unsigned compare: a negative index wraps past any limit,
        # and the limit max(shape, 0) keeps a negative shape empty, as the signed pair would.
        limit = sem.maximum(sem.cast(shape[dim], tl.int64), 0)
        inside = sem.compare("lt", _unsigned(index), _unsigned(limit))
        if dim < collapsed:
            outer = inside if outer is None else sem.bitwise("andi", outer, inside)
            continue
        inside = _along(sem, inside, dim - collapsed, rank)
        mask = inside if mask is None else sem.bitwise("andi", mask, inside)
    if mask is not None:
        mask = sem.broadcast_to(mask, tile_shape)
    if outer is not None:
        outer = sem.splat(outer, tile_shape)
        mask = outer if mask is None else sem.bitwise("andi", mask, outer)
    return pointer, mask


def _padding(option: Any, element: tl.dtype) -> Optional[float]:
    option = tl._unwrap(option)
    if option in ("", None):
        return None
    if option not in ("zero", "nan"):
        raise ValueError(f"padding_option '{option}' is not supported; use \"zero\", \"nan\" "
                         "or \"\" (undefined)")
    if option == "nan" and not element.is_floating():
        raise ValueError(f"padding_option \"nan\" needs a floating-point block, not {element}")
    return 0.0 if option == "zero" else float("nan")


def _boundary_check(boundary_check: Any, rank: int) -> List[int]:
    """Triton's canonical form: distinct dims in [0, rank), sorted."""
    dims = _as_list(boundary_check) if boundary_check not in ((), None) else []
    for dim in dims:
        if isinstance(dim, bool) or not isinstance(dim, int) or not 0 <= dim < rank:
            raise ValueError(f"boundary_check dims must be constexpr ints in [0, {rank}), got "
                             f"{dim!r}")
    if len(set(dims)) != len(dims):
        raise ValueError(f"duplicate dimension in boundary_check {tuple(dims)}")
    return sorted(dims)


def _store(sem: Any, pointer: tensor, value: tensor, mask: Optional[tensor],
           attrs: dict) -> None:
    operands = [pointer, value] + ([mask] if mask is not None else [])
    sem.builder.create("store", [v.handle for v in operands], [], attrs)


# ---- block pointers -------------------------------------------------------------------------


def make_block_ptr(sem: Any, base: Any, shape: Any, strides: Any, offsets: Any,
                   block_shape: Any, order: Any) -> "_api.block_pointer":
    if isinstance(base, _api.block_pointer):
        raise TypeError("make_block_ptr's base must be a pointer, not a block pointer")
    base = _base_pointer(sem, base, "make_block_ptr")
    if base.dtype.element_ty == tl.int1:  # int1 lives in memory as int8, as in Triton
        base = sem.cast(base, tl.pointer_type(tl.int8))
    shape = _scalars(sem, shape, tl.int64, "shape")
    strides = _scalars(sem, strides, tl.int64, "strides")
    offsets = _scalars(sem, offsets, tl.int32, "offsets")
    block_shape = sem.block_shape(_as_list(block_shape))
    order = _as_list(order)
    if sorted(order) != list(range(len(order))):
        raise ValueError(f"order must be a permutation of 0..{len(order) - 1}, got {order}")
    lengths = {len(x) for x in (shape, strides, offsets, order)}
    if lengths != {len(block_shape)}:
        raise ValueError("shape, strides, offsets, block_shape and order must have one length, "
                         f"got {len(shape)}, {len(strides)}, {len(offsets)}, "
                         f"{len(block_shape)} and {len(order)}")
    return _api.block_pointer(base, shape, strides, offsets, block_shape, order)


def advance(sem: Any, pointer: "_api.block_pointer", offsets: Any) -> "_api.block_pointer":
    deltas = _as_list(offsets)
    if len(deltas) != len(pointer.offsets):
        raise ValueError(f"advance needs {len(pointer.offsets)} offsets (one per dim), got "
                         f"{len(deltas)}")
    moved = []
    for index, (offset, delta) in enumerate(zip(pointer.offsets, deltas, strict=True)):
        if isinstance(delta, int) and not isinstance(delta, bool) and delta == 0:
            moved.append(offset)
        else:
            moved.append(sem.add(offset, _scalar(sem, delta, tl.int32, f"offsets[{index}]")))
    return _api.block_pointer(pointer.base, pointer.shape, pointer.strides, moved,
                              pointer.block_shape, pointer.order)


def load(sem: Any, pointer: "_api.block_pointer", mask: Any, other: Any, boundary_check: Any,
         padding_option: Any, cache_modifier: str, eviction_policy: str,
         volatile: bool) -> tensor:
    if mask is not None or other is not None:
        raise ValueError("mask and other cannot be given when loading through a block pointer "
                         "(use boundary_check and padding_option)")
    element = pointer.element_ty
    pad = _padding(padding_option, element)
    checked = _boundary_check(boundary_check, len(pointer.block_shape))
    ptrs, bounds = materialize(sem, pointer.base, pointer.shape, pointer.strides,
                               pointer.offsets, pointer.block_shape, checked)
    # Without a padding option the checked-out elements are undefined (as in Triton).
    fill = pad if bounds is not None else None
    return sem.load(ptrs, bounds, fill, cache_modifier, eviction_policy, volatile)


def store(sem: Any, pointer: "_api.block_pointer", value: Any, mask: Any, boundary_check: Any,
          cache_modifier: str, eviction_policy: str) -> None:
    if mask is not None:
        raise ValueError("mask cannot be given when storing through a block pointer (use "
                         "boundary_check)")
    value = sem.to_tensor(value)
    if not value.shape:
        value = sem.splat(value, pointer.block_shape)
    if value.shape != pointer.block_shape:
        raise ValueError(f"the stored value's shape {value.shape} differs from the block "
                         f"shape {pointer.block_shape}")
    if value.dtype != pointer.element_ty:
        raise TypeError(f"the stored value is {value.dtype} but the block pointer's element "
                        f"type is {pointer.element_ty}; convert it with .to(...)")
    checked = _boundary_check(boundary_check, len(pointer.block_shape))
    ptrs, bounds = materialize(sem, pointer.base, pointer.shape, pointer.strides,
                               pointer.offsets, pointer.block_shape, checked)
    attrs = sem._cache_attrs(cache_modifier, eviction_policy, ("", ".wb", ".cg", ".cs", ".wt"))
    _store(sem, ptrs, value, bounds, attrs)


# ---- tensor descriptors ---------------------------------------------------------------------


def _is_constant_one(value: Any) -> bool:
    if isinstance(value, int) and not isinstance(value, bool):
        return value == 1
    if isinstance(value, tensor) and not value.shape:
        op = value.handle.defining_op
        return op is not None and op.name == "constant" and op.attr("value") == 1
    return False


def make_tensor_descriptor(sem: Any, base: Any, shape: Any, strides: Any, block_shape: Any,
                           padding_option: Any) -> "_api.tensor_descriptor":
    base = _base_pointer(sem, base, "make_tensor_descriptor")
    shape, strides = _as_list(shape), _as_list(strides)
    block_shape = _as_list(block_shape)
    ndim = len(shape)
    if not 1 <= ndim <= 5:
        raise ValueError(f"a tensor descriptor has 1 to 5 dims, got {ndim}")
    if len(strides) != ndim or len(block_shape) != ndim:
        raise ValueError(f"a {ndim}-dim tensor descriptor needs {ndim} strides and block dims, "
                         f"got {len(strides)} and {len(block_shape)}")
    block_shape = sem.block_shape(block_shape)
    element = base.dtype.element_ty
    row_bytes = block_shape[-1] * element.primitive_bitwidth // 8
    if row_bytes < 16:
        raise ValueError("Descriptor block shape must have at least 16 bytes in the last "
                         f"dimension, but got {block_shape[-1]} x {element} = {row_bytes} bytes")
    if not _is_constant_one(strides[-1]):
        raise ValueError(f"a tensor descriptor's last dim must be contiguous: its stride must "
                         f"be the constant 1, got {strides[-1]}")
    padding = tl._unwrap(padding_option)
    if padding not in ("zero", "nan"):
        raise ValueError(f"padding_option '{padding}' is not supported; use \"zero\" or \"nan\"")
    _padding(padding, element)
    desc = _api.tensor_descriptor(base, _scalars(sem, shape, tl.int32, "shape"),
                                  _scalars(sem, strides, tl.int64, "strides"), block_shape,
                                  padding)
    _device_tensor_map.attach(sem, desc)  # under TESSERA_TMA: a map encoded in the kernel
    return desc


def check_descriptor(desc: Any) -> "_api.tensor_descriptor":
    if not isinstance(desc, _api.tensor_descriptor):
        raise TypeError(f"expected a tensor descriptor (tl.make_tensor_descriptor or a "
                        f"TensorDescriptor argument), got {desc}")
    return desc


def _descriptor_access(sem: Any, desc: "_api.tensor_descriptor", offsets: Any,
                       collapsed: int = 0):
    offsets = _as_list(offsets)
    if len(offsets) != len(desc.block_shape):
        raise ValueError(f"expected {len(desc.block_shape)} offsets (one per dim), got "
                         f"{len(offsets)}")
    offsets = [_scalar(sem, o, tl.int32, f"offsets[{i}]") for i, o in enumerate(offsets)]
    return materialize(sem, desc.base, desc.shape, desc.strides, offsets, desc.block_shape,
                       range(len(desc.block_shape)), collapsed)


def descriptor_load(sem: Any, desc: "_api.tensor_descriptor", offsets: Any) -> tensor:
    """Elements outside the tensor read as the padding (0 or NaN), as Triton's TMA loads.

    A block of rank 3 to 5 whose leading dims are 1 (``[1, BLOCK, D]``) loads the 2-D tile
    of the last two dims and reshapes it to the block: the pipeliner rings 2-D tiles (and the
    TMA copies them: device/tma.py, ``copyable_block``), and the kernel's own reshape back to
    2-D (``desc.load([h, m, 0]).reshape([BLOCK, D])``) then folds away (canonicalize)."""
    tensormap = desc.__dict__.get("tensormap")  # under TMA: a parameter's or a device map
    coords = []  # made before the load that takes them (a constant offset is a new op)
    if tensormap is not None:
        coords = [_scalar(sem, o, tl.int32, f"offsets[{i}]").handle
                  for i, o in enumerate(_as_list(offsets))]
    # Leading dims of 1 collapse with or without a map: the 2-D tile is what the pipeliner
    # rings (cp.async or TMA) and what the dot reads.
    rank = len(desc.block_shape)
    collapsed = rank - 2 if rank > 2 and all(b == 1 for b in desc.block_shape[:-2]) else 0
    ptrs, bounds = _descriptor_access(sem, desc, offsets, collapsed)
    result = sem.load(ptrs, bounds, _padding(desc.padding, desc.dtype), "", "", False)
    load = result.handle.defining_op
    load.set_attr(DESCRIPTOR_ATTR, True)
    if tensormap is not None and load.name == "load" and len(load.operands) == 3:
        # The masked load stays its meaning everywhere; the tensor map and the box's
        # coordinates (one per dim of the descriptor, the collapsed ones first) let the
        # pipeliner copy it with TMA instead (transforms/pipeline/tma.h).
        load.set_operands(list(load.operands) + [tensormap.handle] + coords)
        load.set_attr("tma", True)
    return sem.reshape(result, desc.block_shape) if collapsed else result


def descriptor_store(sem: Any, desc: "_api.tensor_descriptor", offsets: Any,
                     value: Any) -> None:
    value = sem.to_tensor(value)
    if value.shape != desc.block_shape:
        raise ValueError(f"the stored value's shape {value.shape} differs from the "
                         f"descriptor's block shape {desc.block_shape}")
    value = sem.cast(value, desc.dtype)
    tensormap = desc.__dict__.get("tensormap")
    coords = []  # made before the store that takes them (a constant offset is a new op)
    # Under TESSERA_TMA_STORE, a 2-D descriptor's map rides along: a host descriptor's kernel
    # parameter, or the map a device descriptor encodes (kept by this use: the pipeline drops
    # only maps nothing reads; its writer is the thread that issues the TMA copies).
    tma = (getattr(sem, "tma_store", False) and tensormap is not None
           and len(desc.block_shape) == 2)
    if tma:
        coords = [_scalar(sem, o, tl.int32, f"offsets[{i}]").handle
                  for i, o in enumerate(_as_list(offsets))]
    ptrs, bounds = _descriptor_access(sem, desc, offsets)
    if tma and tensormap is not None and bounds is not None:
        # The masked store stays its meaning (interpreter, every pass, and codegen wherever
        # the TMA store does not apply: analysis::tmaStoreTile); codegen copies the tile out
        # by TMA from the map and the box's coordinates (codegen/lower_tma.h, lowerTmaStore).
        sem.builder.create("store", [ptrs.handle, value.handle, bounds.handle, tensormap.handle]
                           + coords, [], {DESCRIPTOR_ATTR: True, "tma": True})
        return
    _store(sem, ptrs, value, bounds, {DESCRIPTOR_ATTR: True})


# ---- descriptor reductions (Triton's desc.atomic_add ... atomic_xor) ---------------------------

# The dtypes each reduction takes: Triton's (semantic.py, descriptor_atomic_*), which are the
# TMA reduction's (cp.reduce.async.bulk.tensor) element types.
_MIN_MAX_DTYPES = (tl.uint32, tl.int32, tl.uint64, tl.int64, tl.float16, tl.bfloat16)
_BITWISE_DTYPES = (tl.uint32, tl.int32, tl.uint64, tl.int64)
REDUCTION_DTYPES = {
    "add": (tl.uint32, tl.int32, tl.uint64, tl.float32, tl.float16, tl.bfloat16),
    "min": _MIN_MAX_DTYPES, "max": _MIN_MAX_DTYPES,
    "and": _BITWISE_DTYPES, "or": _BITWISE_DTYPES, "xor": _BITWISE_DTYPES,
}


def descriptor_atomic(sem: Any, desc: "_api.tensor_descriptor", op: str, offsets: Any,
                      value: Any) -> None:
    """``desc.atomic_<op>(offsets, value)``: the masked pointer atomic of the block (the
    pointers and in-bounds mask of ``descriptor_store``), relaxed, gpu scope, its old values
    unused, so elements outside the tensor are not touched. That is its meaning everywhere
    (interpreter, every pass, sm_80, and codegen wherever the TMA reduction does not apply).

    Under TESSERA_TMA_REDUCE (on by default; with TESSERA_TMA on sm_90a) a 2-D descriptor's
    map rides along as for a TMA store (operands tensormap, row, column; attribute ``tma``):
    the pipeline pass keeps them where the store's rules hold (analysis::tmaStoreTile, the
    mask constant over 16-byte runs), and codegen then stages the tile in shared memory and
    one thread issues cp.reduce.async.bulk.tensor (codegen/lower_tma.h, lowerTmaReduce)."""
    element = desc.dtype
    offsets = _as_list(offsets)
    if len(offsets) != len(desc.block_shape):
        raise ValueError(f"expected {len(desc.block_shape)} offsets (one per dim), got "
                         f"{len(offsets)}")
    if not isinstance(value, tensor) or value.shape != desc.block_shape:
        shape = value.shape if isinstance(value, tensor) else value
        raise ValueError(f"descriptor atomic_{op}: the value's shape {shape} differs from the "
                         f"descriptor's block shape {desc.block_shape} (it takes a block)")
    if element not in REDUCTION_DTYPES[op]:
        names = ", ".join(str(t) for t in REDUCTION_DTYPES[op])
        raise TypeError(f"descriptor atomic_{op}: Unsupported dtype {element} (it takes "
                        f"{names})")
    same_bits = (value.dtype.is_int() and element.is_int()
                 and value.dtype.int_bitwidth == element.int_bitwidth)
    if value.dtype != element and not same_bits:
        raise TypeError(f"descriptor atomic_{op}: the value is {value.dtype} but the "
                        f"descriptor's dtype is {element}; convert it with .to(...)")
    tensormap = desc.__dict__.get("tensormap")
    tma = (getattr(sem, "tma_reduce", False) and tensormap is not None
           and len(desc.block_shape) == 2)
    coords = []  # made before the atomic that takes them (a constant offset is a new op)
    if tma:
        coords = [_scalar(sem, o, tl.int32, f"offsets[{i}]").handle
                  for i, o in enumerate(offsets)]
    ptrs, bounds = _descriptor_access(sem, desc, offsets)
    if op in ("min", "max") and element in (tl.float16, tl.bfloat16):
        # Triton's take these with native TMA only (sm_90); here also as the pointer atomic
        # (atomic_rmw fmin/fmax, IEEE minNum/maxNum: a NaN operand gives the other one; the
        # TMA's handling of NaN is the hardware's, not checked), which tl.atomic_min/max do
        # not offer for 16-bit floats.
        result = sem.atomic_rmw("f" + op, ptrs, sem.cast(value, element), bounds,
                                {"sem": "relaxed", "scope": "gpu"})
    else:
        result = sem.atomic(op, ptrs, value, bounds, "relaxed", "gpu")
    atomic = result.handle.defining_op
    atomic.set_attr(DESCRIPTOR_ATTR, True)
    if tma and tensormap is not None and atomic.name == "atomic_rmw" and \
            len(atomic.operands) == 3:
        atomic.set_operands(list(atomic.operands) + [tensormap.handle] + coords)
        atomic.set_attr("tma", True)


# ---- descriptor gathers and scatters (Triton's TMA gather / scatter) -------------------------

def _gather_access(sem: Any, desc: "_api.tensor_descriptor", x_offsets: Any, y_offset: Any,
                   what: str) -> Tuple[tensor, tensor]:
    """Pointers and in-bounds mask of rows ``x_offsets`` (a 1-D tile), columns ``y_offset`` ..
    ``y_offset + block_shape[1]``, with Triton's checks (a [1, N] block, >= 8 rows, rows of at
    least 32 bytes... as its descriptor_gather asserts)."""
    if len(desc.block_shape) != 2:
        raise ValueError(f"descriptor must be 2D, but got {desc.block_shape}")
    if desc.block_shape[0] != 1:
        raise ValueError(f"descriptor block must have 1 row, but got {desc.block_shape}")
    if (not isinstance(x_offsets, tensor) or len(x_offsets.shape) != 1
            or not x_offsets.dtype.is_int()):
        raise ValueError(f"x offsets must be 1D, but got {getattr(x_offsets, 'shape', x_offsets)}")
    rows = x_offsets.shape[0]
    if rows < 8:
        raise ValueError(f"descriptor {what} must have at least 8 rows, but got {x_offsets.shape}")
    min_cols = 32 // desc.dtype.primitive_bitwidth * 8
    if desc.block_shape[1] < min_cols:
        raise ValueError(f"descriptor {what} of {desc.dtype} must have at least {min_cols} "
                         f"columns, but got {desc.block_shape[1]}")
    cols = desc.block_shape[1]
    row_index = sem.expand_dims(sem.cast(x_offsets, tl.int64), 1)
    y_offset = _scalar(sem, y_offset, tl.int32, "y_offset")
    col_index = sem.expand_dims(sem.add(_int_range(sem, cols), sem.cast(y_offset, tl.int64)), 0)
    pointer = sem.add(sem.add(desc.base, sem.mul(row_index, desc.strides[0])),
                      sem.mul(col_index, desc.strides[1]))
    pointer = sem.broadcast_to(pointer, [rows, cols])
    mask = None
    for index, extent in ((row_index, desc.shape[0]), (col_index, desc.shape[1])):
        limit = sem.maximum(sem.cast(extent, tl.int64), 0)
        inside = sem.compare("lt", _unsigned(index), _unsigned(limit))
        mask = inside if mask is None else sem.bitwise("andi", mask, inside)
    return pointer, sem.broadcast_to(mask, [rows, cols])


def descriptor_gather(sem: Any, desc: "_api.tensor_descriptor", x_offsets: Any,
                      y_offset: Any) -> tensor:
    """Rows ``x_offsets`` of the tensor, ``block_shape[1]`` columns from ``y_offset``; rows or
    columns outside the tensor read as the padding."""
    ptrs, mask = _gather_access(sem, desc, x_offsets, y_offset, "gather")
    return sem.load(ptrs, mask, _padding(desc.padding, desc.dtype), "", "", False)


def descriptor_scatter(sem: Any, desc: "_api.tensor_descriptor", value: Any, x_offsets: Any,
                       y_offset: Any) -> None:
    """Writes ``value`` ([len(x_offsets), block_shape[1]]) to those rows and columns; parts
    outside the tensor are not written."""
    ptrs, mask = _gather_access(sem, desc, x_offsets, y_offset, "scatter")
    value = sem.to_tensor(value)
    if value.shape != ptrs.shape:
        raise ValueError(f"the scattered value's shape {value.shape} differs from "
                         f"[len(x_offsets), block_shape[1]] = {ptrs.shape}")
    _store(sem, ptrs, sem.cast(value, desc.dtype), mask, {})
