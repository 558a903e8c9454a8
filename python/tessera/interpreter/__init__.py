"""The tile-IR interpreter: runs a kernel's IR on the CPU with NumPy, program by program.

It is the reference the compiler is tested against, so it is exact. It runs the front end's IR
and the IR after any pass (canonicalize, cse, dce, licm, and the layout passes: encodings are
ignored and convert_layout is the identity). Example::

    from tessera import interpreter
    interpreter.run(module, grid=(cdiv(n, 1024),), args=[x, y, out, n])

Semantics, where LLVM or the GPU leave a choice (each is what PTX does, or an error):

- Values: scalars are NumPy scalars of the exact dtype, tensors NumPy arrays of the IR shape;
  i1 is bool, bf16 / f8e4m3 (e4m3fn) / f8e5m2 come from ml_dtypes, pointers are int64 virtual
  addresses (memory.py) and addptr scales offsets by the pointee size. Integers are host
  addresses: ptrtoint (and a pointer stored to memory) gives the real address, inttoptr (and
  a pointer loaded from memory) maps one back into the argument, NumPy array or CPU tensor that
  holds it, found among the live Python objects if it is not an argument (host_buffers.py).
- Integers wrap at their bit width; unsigned ops (divui, remui, shrui, cmpi u*, maxui/minui,
  extui, uitofp, fptoui) read the same bits as unsigned. divsi/remsi follow C (toward zero;
  INT_MIN / -1 wraps to INT_MIN). Integer division by zero raises KernelRuntimeError.
- Shifts by >= the bit width (amounts read unsigned) clamp as PTX's shl/shr: shli and shrui
  give 0, shrsi gives the sign fill. LLVM calls these poison.
- Floats round to nearest even once per op in the element type: f16/bf16/fp8 compute in f32
  and round (exact for + - * / since f32 has >= 2p+2 bits); conversions round once (through
  a round-to-odd f32, where NumPy and ml_dtypes would round twice). fp8 results saturate to
  the largest finite value (PTX's cvt.rn.satfinite; inf included). No flush to zero.
- fptosi/fptoui truncate toward zero, saturate to the integer range and map NaN to 0, as
  PTX's cvt.rzi (LLVM: poison). maxnumf/minnumf: a NaN operand loses; maximumf/minimumf: NaN
  wins; all four order -0 < +0. NaN payloads are not specified.
- Loads: masked-off lanes take `other` (0 without it) and are never checked; an unmasked lane
  outside every buffer the launch can see (its arguments, and arrays found through pointers
  read from memory), or misaligned for its type, raises KernelRuntimeError naming kernel,
  program id, source line, lane, address and buffer. Stores: masked lanes are not
  written; for repeated addresses in one store the last lane in row-major order wins (a GPU
  picks any); storing into a read-only buffer (e.g. a JAX array) raises.
- Arguments: an array's dtype must have the pointee's width (else the kernel would read the
  wrong bytes) and be a number type. Strided views work as on the GPU: the kernel gets the
  first element's address and must apply the strides itself. A view with gaps (a[:, ::2])
  adds a check that the GPU cannot make: touching a byte between its elements (a kernel
  that addresses it as if contiguous) raises, naming kernel, program id, line and argument.
  A dense view in another order (a.T) is read as laid out in memory, exactly as on the GPU.
- print (tl.device_print) writes one line per element in Triton's GPU format, in row-major
  order (debug.py); assert (tl.device_assert) raises KernelAssertionError, naming the
  kernel, program id, line, message and first failing index.
- for: signed bounds, iv = lb, lb + step, ... while iv < ub (a non-positive step with lb < ub
  raises). Programs run one after another in row-major grid order (the last axis fastest),
  each seeing the stores of the earlier ones: a GPU gives no such order, so a kernel whose
  output depends on it is racy even where the interpreter looks deterministic.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np

from .arguments import bind_arguments
from .errors import KernelAssertionError, KernelRuntimeError
from .evaluator import plan_for, run_plan
from .memory import AddressSpace
from .tma import map_global_scratch

__all__ = ["run", "KernelRuntimeError", "KernelAssertionError"]


# A GPU's grid limits (CUDA's maxGridDimX/Y/Z on every architecture Tessera targets): the
# interpreter refuses what no GPU would launch, so a kernel never works only on the CPU.
GRID_LIMITS = (2**31 - 1, 65535, 65535)


def _normalize_grid(grid: Union[int, Sequence[int]], kernel: str) -> Tuple[int, ...]:
    if isinstance(grid, (int, np.integer)) and not isinstance(grid, bool):
        dims: Tuple[Any, ...] = (grid,)
    elif isinstance(grid, (tuple, list)):
        dims = tuple(grid)
    else:
        raise KernelRuntimeError("the grid must be an int or a tuple of 1 to 3 ints (or a "
                                 "callable returning one), got "
                                 f"{type(grid).__name__} {grid!r}", kernel)
    if not 1 <= len(dims) <= 3 or any(isinstance(d, bool) or not isinstance(d, (int, np.integer))
                                      or d < 0 for d in dims):
        raise KernelRuntimeError(f"grid must be 1 to 3 non-negative integers, got {grid!r}",
                                 kernel)
    for axis, (size, limit) in enumerate(zip(dims, GRID_LIMITS)):
        if size > limit:
            raise KernelRuntimeError(f"grid axis {axis} has {size} programs; a GPU launches at "
                                     f"most {limit} along it (grid {tuple(dims)!r})", kernel)
    return tuple(int(d) for d in dims)


def run(module, grid: Union[int, Tuple[int, ...]], args: Sequence[Any],
        kernel_name: Optional[str] = None, arg_names: Optional[Sequence[str]] = None) -> None:
    """Runs kernel `kernel_name` of `module` (the only one when None) over `grid`.

    args correspond one-to-one to the kernel's arguments: arrays (NumPy, or CPU tensors with
    __dlpack__, updated in place) for pointers, numbers for scalars; arg_names (optional)
    name them in messages. Raises KernelRuntimeError naming the kernel, the program id and
    the op's source location when the kernel faults.
    """
    with np.errstate(all="ignore"):  # rounding a constant or argument to inf is no accident
        plan = plan_for(module, kernel_name)
        dims = _normalize_grid(grid, plan.name)
        memory = AddressSpace()
        values = bind_arguments(plan, args, memory, arg_names)
        if plan.global_scratch:  # what the launcher allocates (tessera.set_allocator)
            map_global_scratch(memory, plan.global_scratch, dims)
        run_plan(plan, dims, values, memory)
