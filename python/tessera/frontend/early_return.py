"""`return` inside a runtime `if` (early exit), in structured tile IR.

The IR has no branches, only structured regions, so an early return becomes a flag. A runtime
``if`` whose branch returned yields, besides the variables it changes, an i1 "returned" flag
and the return value (zeros of the value's type on the paths that did not return); every
statement after it then runs under ``if not returned``::

    if pid >= n_valid:          %done = if %c { yield true } else { yield false }
        return                  if (!%done) { x = load ...; store ... }
    x = tl.load(...)
    tl.store(...)

A helper returning a value does the same with the value: ``if x > 0: return a`` then
``return b`` yields ``a`` or ``b`` from the if, the value of the call. As in Triton, every
return of a function gives one type (a function may not return a value on one path and fall
off its end on another), and a return inside a runtime ``for`` or ``while`` is an error.

The generator's state between statements is one of: nothing returned; returned on every path
(``returned``; later statements are dead); returned on some paths (``return_flag``, a runtime
i1; later statements are guarded).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, List, Optional, Sequence, Tuple

from .. import errors
from ..language import core as tl

if TYPE_CHECKING:
    from .ast_to_ir import CodeGenerator

NONE, MAYBE, DEFINITE = "none", "maybe", "definite"


@dataclass
class ReturnState:
    """How a region ended: no return, a return on some paths (``flag``), or on all paths."""
    kind: str = NONE
    flag: Optional[tl.tensor] = None
    value: Any = None


def _flatten(value: Any, what: str) -> Tuple[List[tl.tensor], Any]:
    """A return value as (tensors, structure): None, a tensor, or nested tuples of them."""
    if value is None:
        return [], None
    if isinstance(value, tl.tensor):
        return [value], "tensor"
    if isinstance(value, (tuple, list)):
        leaves: List[tl.tensor] = []
        structure = []
        for item in value:
            item_leaves, item_structure = _flatten(item, what)
            leaves += item_leaves
            structure.append(item_structure)
        return leaves, (type(value), tuple(structure))
    raise TypeError(f"{what} returns the compile-time value {value!r} under a runtime "
                    "condition; only runtime values (and tuples of them) can be returned there")


def _rebuild(structure: Any, leaves: List[tl.tensor]) -> Any:
    if structure is None:
        return None
    if structure == "tensor":
        return leaves.pop(0)
    kind, items = structure
    values = [_rebuild(item, leaves) for item in items]
    return kind._make(values) if hasattr(kind, "_make") else kind(values)  # namedtuples too


def _signature(value: Any) -> str:
    leaves, structure = _flatten(value, "this function")
    return f"{structure!r}:" + ",".join(str(t) for t in leaves)


class ReturnMixin:
    """Early returns for the code generator (see the module docstring)."""

    def take_return_state(self: "CodeGenerator") -> ReturnState:
        """The state the last region left, reset to "nothing returned" for the next one."""
        if self.returned:
            state = ReturnState(DEFINITE, None, self.return_value)
        elif self.return_flag is not None:
            state = ReturnState(MAYBE, self.return_flag, self.return_value)
        else:
            state = ReturnState()
        self.returned, self.return_flag, self.return_value = False, None, None
        return state

    def check_return_allowed(self: "CodeGenerator", node: ast.Return) -> None:
        if self.loop_depth:
            raise self.unsupported(node, "Cannot have `return` statements inside `while` or "
                                         "`for` statements (as in Triton): keep a flag in the "
                                         "loop, or use a while condition")

    def return_yields(self: "CodeGenerator", states: Sequence[ReturnState],
                      earlier_else: bool = False) -> Optional[Tuple[bool, Any]]:
        """For the branches of an if: None when no branch returned; else (whether a flag is
        yielded, the structure of the yielded value). Checks that the values agree (naming
        the earlier return first: the else branch's when it returned before the if)."""
        ordered = list(reversed(states)) if earlier_else else list(states)
        returning = [s for s in ordered if s.kind != NONE]
        if not returning:
            return None
        first = _signature(returning[0].value)
        for state in returning[1:]:
            if _signature(state.value) != first:
                raise TypeError(f"Inconsistent return types: {_describe(returning[0].value)} "
                                f"and {_describe(state.value)}")
        with_flag = any(s.kind != DEFINITE for s in states)
        return with_flag, returning[0].value

    def branch_return_values(self: "CodeGenerator", state: ReturnState, with_flag: bool,
                             template: Any) -> List[tl.tensor]:
        """What one branch yields for the return state (built at the insertion point, the
        end of the branch): the flag, then the value's tensors (zeros where none returned)."""
        out: List[tl.tensor] = []
        if with_flag:
            if state.kind == MAYBE:
                out.append(state.flag)
            else:
                out.append(self.semantic.scalar_constant(int(state.kind == DEFINITE), tl.int1))
        if state.kind == NONE:
            out += [self._placeholder(t) for t in _flatten(template, "this function")[0]]
        else:
            out += _flatten(state.value, "this function")[0]
        return out

    def _placeholder(self: "CodeGenerator", like: tl.tensor) -> tl.tensor:
        """Zeros of ``like``'s type: the return value on paths that did not return (never
        read: the flag says so)."""
        if like.dtype.is_ptr():
            zero = self.semantic.full(like.shape, 0, tl.int64) if like.shape else \
                self.semantic.scalar_constant(0, tl.int64)
            return self.semantic.create("inttoptr", [zero], like.dtype, like.shape)
        if like.shape:
            return self.semantic.full(like.shape, 0, like.dtype)
        return self.semantic.scalar_constant(0, like.dtype)

    def set_return_state(self: "CodeGenerator", states: Sequence[ReturnState], with_flag: bool,
                         template: Any, results: List[tl.tensor]) -> None:
        """After the if: its results (flag first, then the value's tensors) become the state."""
        leaves = list(results)
        flag = leaves.pop(0) if with_flag else None
        structure = _flatten(template, "this function")[1]
        self.return_value = _rebuild(structure, leaves)
        if all(s.kind == DEFINITE for s in states):
            self.returned = True
        else:
            self.return_flag = flag

    def guard_rest(self: "CodeGenerator", statements: List[ast.stmt]) -> None:
        """Compiles the statements after an if that returned on some paths under
        ``if not returned``; the paths that returned keep their value."""
        flag, value = self.return_flag, self.return_value
        self.return_flag, self.return_value = None, None
        previous = ReturnState(DEFINITE, None, value)
        node = ast.If(test=ast.Constant(True), body=statements, orelse=[])
        ast.copy_location(node, statements[0])
        try:
            self.runtime_if(node, self.semantic.logical_not(flag), else_state=previous)
        except errors.CompilationError:
            raise
        except (TypeError, ValueError) as error:  # e.g. inconsistent return types
            raise self.error(statements[0], str(error)) from error

    def function_result(self: "CodeGenerator", node: ast.AST) -> Any:
        """The value of the function after its body: a path that falls off the end returns
        None, so it must agree with the paths that returned."""
        state = self.take_return_state()
        if state.kind == MAYBE and state.value is not None:
            raise self.error(node, "Inconsistent return types: some paths return "
                                   f"{_describe(state.value)} and others fall off the end of "
                                   "the function (returning None)")
        return state.value


def _describe(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(_describe(v) for v in value) + ")"
    return str(value)

