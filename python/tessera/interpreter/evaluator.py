"""Runs a planned tile-IR kernel over its grid: structured control flow and the program loop.

Programs run one after another in row-major order over the grid (the last axis fastest, as
nested loops over axis 0, 1, 2), each seeing the stores of the ones before it. A GPU promises
no order at all; a kernel whose result depends on it is racy and the interpreter hides that.
Every op's result is checked against its IR type, so a handler cannot silently drift.
"""
from __future__ import annotations

import itertools
import math
from collections import OrderedDict
from typing import List, Optional, Sequence, Tuple

import numpy as np

from . import debug  # noqa: F401  (registers the print and assert handlers)
from . import reduction  # noqa: F401  (registers the reduce and scan handlers)
from . import matrix  # noqa: F401  (registers dot, trans and the shared-memory ops)
from . import math as math_handlers  # noqa: F401  (registers exp, log, sqrt, erf, fma, ...)
from . import atomic  # noqa: F401  (registers atomic_rmw and atomic_cas)
from . import libdevice  # noqa: F401  (registers extern_elementwise: libdevice)
from . import tma  # noqa: F401  (registers tma_load and the mbarrier ops)
from . import warp_roles
from .errors import AssertionFault, KernelAssertionError, KernelRuntimeError, OpFault
from .handlers import HANDLERS, handles
from .memory import AccessError, AddressSpace
from .progress import CHECK_EVERY, GridProgress
from .plan import BlockPlan, FuncPlan, OpInfo, PlanError, compile_func


class ProgramState:
    """What handlers may read while a program runs: its id, the grid, memory, the values."""
    __slots__ = ("pid", "grid", "grid_shape", "memory", "env", "kernel")

    def __init__(self, kernel: str, grid: Tuple[int, ...], memory: AddressSpace,
                 num_slots: int) -> None:
        self.kernel = kernel
        self.grid_shape = grid  # as the caller gave it: pids in messages have its length
        self.grid = tuple(grid) + (1,) * (3 - len(grid))  # what program_id/num_programs see
        self.memory = memory
        self.env: list = [None] * num_slots
        self.pid: Tuple[int, int, int] = (0, 0, 0)

    def run_block(self, block: BlockPlan, args: Sequence) -> list:
        """Binds the block's arguments, runs its ops, returns its terminator's operands."""
        env = self.env
        for slot, value in zip(block.arg_slots, args):
            env[slot] = value
        step = None
        try:
            for step in block.steps:
                result = step.fn(self, *[env[i] for i in step.ins])
                if step.unpack:
                    for slot, value in zip(step.outs, result):
                        env[slot] = value
                elif step.outs:
                    dtype, shape = step.checks[0]
                    if result.dtype != dtype or np.shape(result) != shape:
                        raise _mismatch(result, dtype, shape)
                    if not shape and type(result) is np.ndarray:
                        result = result[()]  # scalars are NumPy scalars, not 0-d arrays
                    env[step.outs[0]] = result
        except KernelRuntimeError:
            raise
        except (OpFault, AccessError) as e:
            raise self.error(step, str(e), isinstance(e, AssertionFault)) from None
        except Exception as e:  # a bug in a handler: report it where it happened
            raise self.error(step, f"internal interpreter error: {type(e).__name__}: {e}") from e
        return [env[i] for i in block.term_slots]

    def error(self, step, reason: str, assertion: bool = False) -> KernelRuntimeError:
        pid = self.pid[:len(self.grid_shape)]
        cls = KernelAssertionError if assertion else KernelRuntimeError
        return cls(reason, self.kernel, pid, step.name if step else "",
                   step.location if step else "")


def _mismatch(result, dtype, shape) -> Exception:
    return RuntimeError(f"produced {np.asarray(result).dtype}{list(np.shape(result))}, "
                        f"expected {dtype}{list(shape)}")


# --- control flow -----------------------------------------------------------------------------

@handles("for")
def _for(info: OpInfo):
    """Signed bounds; the induction variable takes lb, lb + step, ... while below ub. A step
    that is not positive would loop forever on a GPU when lb < ub: that raises."""
    body = info.blocks[0]
    make_iv = info.operands[0].dtype.type

    def loop(state, lower, upper, step, *carried):
        lower, upper, step = int(lower), int(upper), int(step)
        if step <= 0 and lower < upper:
            raise OpFault(f"for loop from {lower} to {upper} with step {step} never ends")
        values = list(carried)
        for iv in range(lower, upper, step):
            values = state.run_block(body, [make_iv(iv)] + values)
        return tuple(values)

    return loop


@handles("if")
def _if(info: OpInfo):
    then_block, else_block = info.blocks

    def branch(state, condition):
        return tuple(state.run_block(then_block if condition else else_block, ()))

    return branch


@handles("while")
def _while(info: OpInfo):
    before, after = info.blocks

    def loop(state, *carried):
        values = list(carried)
        while True:
            condition, *values = state.run_block(before, values)
            if not condition:
                return tuple(values)
            values = state.run_block(after, values)

    return loop


# --- plans and the program loop -----------------------------------------------------------------

_PLANS: "OrderedDict[Tuple[str, str], FuncPlan]" = OrderedDict()
_MAX_PLANS = 64


def plan_for(module, kernel_name: Optional[str]) -> FuncPlan:
    """The (cached) plan of a kernel; the key is the module's text, so a module changed by a
    pass gets a new plan and identical modules share one."""
    functions = module.functions()
    if kernel_name is None:
        if len(functions) != 1:
            names = [f.attr("sym_name") for f in functions]
            raise KernelRuntimeError(f"the module has {len(functions)} kernels {names}; "
                                     "pass kernel_name")
        func = functions[0]
        kernel_name = func.attr("sym_name")
    else:
        func = module.lookup_function(kernel_name)
        if func is None:
            raise KernelRuntimeError(f"the module has no kernel named '{kernel_name}'")
    key = (module.str(locations=True), kernel_name)
    plan = _PLANS.get(key)
    if plan is None:
        try:
            plan = compile_func(func, HANDLERS)
        except PlanError as e:
            raise KernelRuntimeError(str(e), kernel_name, None, e.op_name, e.location) from None
        _PLANS[key] = plan
        if len(_PLANS) > _MAX_PLANS:
            _PLANS.popitem(last=False)
    else:
        _PLANS.move_to_end(key)
    return plan


def run_plan(plan: FuncPlan, grid: Tuple[int, ...], args: List, memory: AddressSpace) -> None:
    """Runs every program of the grid in row-major order."""
    state = ProgramState(plan.name, tuple(grid), memory, plan.num_slots)
    progress = GridProgress(plan.name, math.prod(state.grid))
    done = 0
    with np.errstate(all="ignore"):  # wrap-around and inf/NaN are the semantics, not accidents
        try:
            for pid in itertools.product(*(range(n) for n in state.grid)):
                state.pid = pid
                try:
                    state.run_block(plan.body, args)
                except BaseException:
                    warp_roles.end_program(state, failed=True)
                    raise
                warp_roles.end_program(state, failed=False)  # its producer ended too
                done += 1
                if progress.enabled and done % CHECK_EVERY == 0:
                    progress.tick(done)
        finally:  # a fault's message starts on a line of its own
            progress.close(done)
