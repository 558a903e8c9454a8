"""Binds host arguments to a kernel's block arguments for the interpreter.

Pointer arguments are NumPy arrays or any CPU object with __dlpack__ (PyTorch, JAX, ...),
viewed without copying so that stores land in the caller's memory; scalars are converted to
the IR type exactly, and refused (not wrapped) when they do not fit.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

import numpy as np

from . import numerics as nm
from .errors import KernelRuntimeError
from . import tma
from .host_arrays import as_array as _as_array
from .memory import AddressSpace
from .plan import FuncPlan, TypeInfo

_NUMERIC = set(nm.DTYPES.values()) | {np.dtype(f"u{n}") for n in (1, 2, 4, 8)}


def _scalar(obj: Any, t: TypeInfo, reject):
    if isinstance(obj, np.ndarray) and obj.ndim == 0:
        obj = obj[()]
    dtype = t.dtype
    if dtype.kind in "iub":
        if not isinstance(obj, (int, np.integer, np.bool_)):
            reject(f"expected an integer for {t.text}, got {type(obj).__name__} {obj!r}")
        value = int(obj)
        width = nm.bit_width(dtype)
        low, high = (0, 1) if dtype == nm.BOOL else (-(1 << (width - 1)), (1 << (width - 1)) - 1)
        if width == 64:  # IR integers are signless: i64 also carries u64 arguments (>= 2**63)
            high = (1 << 64) - 1
        if not low <= value <= high:
            reject(f"{value} does not fit in {t.text}")
        return nm.wrap_int(value, dtype)
    if isinstance(obj, np.generic) and obj.dtype in _NUMERIC:  # ml_dtypes' bf16 and fp8 too
        source = np.asarray(obj, np.int64 if obj.dtype == nm.BOOL else obj.dtype)
    elif isinstance(obj, float):
        source = np.asarray(obj, np.float64)
    elif isinstance(obj, int) and -(1 << 63) <= obj < 1 << 64:
        source = np.asarray(obj, np.int64 if obj < 1 << 63 else np.uint64)
    else:
        reject(f"expected a number for {t.text}, got {type(obj).__name__} {obj!r}")
    return nm.to_float(source, dtype)[()]


def _check_array(array: np.ndarray, t: TypeInfo, reject) -> None:
    """The element type must be a number type of the pointee's width: the kernel reads the
    memory as its pointee type, so another width would read the wrong bytes."""
    if array.dtype not in _NUMERIC:
        reject(f"arrays of dtype {array.dtype} are not supported; pass bool, (u)int8..64, "
               "float16, bfloat16, float32, float64 or float8 data")
    if array.dtype.itemsize != t.pointee.itemsize:
        reject(f"got a {array.dtype} array ({array.dtype.itemsize}-byte elements) for a pointer "
               f"to {t.pointee} ({t.pointee.itemsize}-byte elements)")


def bind_arguments(plan: FuncPlan, args: Sequence[Any], memory: AddressSpace,
                   names: Optional[Sequence[str]] = None) -> List[Any]:
    """The values of the func's block arguments; pointer arguments are mapped into memory.
    `names` (the kernel's parameter names, optional) make the messages name each argument."""
    if len(args) != len(plan.arg_types):
        raise KernelRuntimeError(f"kernel takes {len(plan.arg_types)} arguments "
                                 f"({', '.join(t.text for t in plan.arg_types)}), got {len(args)}",
                                 plan.name)
    values = []
    for index, (obj, t) in enumerate(zip(args, plan.arg_types)):
        if names:
            buffer_name = f"argument '{names[index]}' (#{index})"
            label = f"argument '{names[index]}' (#{index}, {t.text})"
        else:
            buffer_name, label = f"argument #{index}", f"argument #{index} ({t.text})"

        def reject(reason: str, label=label):
            raise KernelRuntimeError(f"{label}: {reason}", plan.name)

        if t.shape:
            reject("tensor arguments are not supported: pass a pointer")
        if index in plan.tensormaps:  # a CUtensorMap parameter: its TensorDescriptor
            values.append(tma.bind_tensor_map(obj, memory, index, buffer_name, reject))
            continue
        if t.pointee is not None:
            array = _as_array(obj, reject)
            _check_array(array, t, reject)
            value = np.int64(memory.add(array, index, buffer_name))
        else:
            value = _scalar(obj, t, reject)
        _check_specialization(value, t, plan.divisibility[index], reject)
        values.append(value)
    return values


def _check_specialization(value, t: TypeInfo, divisor: int, reject) -> None:
    """A kernel specialized for 16-divisible pointers or ints is wrong for other values (its
    accesses were vectorized for them): say so rather than run what the GPU would not."""
    if divisor <= 1 or t.dtype.kind not in "iu":
        return
    if int(value) % divisor:
        what = "address" if t.pointee is not None else "value"
        reject(f"the kernel was specialized for arguments divisible by {divisor} (func "
               f"attribute divisibility), but this {what} is {int(value) % divisor} past a "
               "multiple; build the IR for this argument's specialization")
