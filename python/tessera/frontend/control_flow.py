"""Structured control flow for the code generator: if, conditional expressions, for, while.

A condition or bound known at compile time is folded: ``if CONSTEXPR:`` compiles only the
taken branch, ``tl.static_range`` unrolls. Otherwise the statement becomes an IR region op
whose results carry the variables it changes, e.g. for a loop that updates ``acc``:

    for i in range(0, n):          %r = for %lb, %ub, %step, %acc0 {
        acc += tl.load(p + i)        ^bb(%i: i32, %acc: f32):  ... yield %acc1 }

Rules (as Triton): a variable keeps its type across a loop or a runtime if; a variable first
assigned inside a runtime block (one branch, or a loop body) is not defined after it.
Structured values (block pointers, tensor descriptors: language/block_pointer.py) travel as
their runtime parts, one carried value each (``_flatten`` / ``_unflatten``).
"""
from __future__ import annotations

import ast
import builtins
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from .. import errors
from ..language import compat_types
from ..language import core as tl
from ..language.semantic import integer_promote, normalize_number
from .early_return import DEFINITE, ReturnState

if TYPE_CHECKING:
    from .ast_to_ir import CodeGenerator


def assigned_names(statements: Sequence[ast.stmt]) -> List[str]:
    """Names a block of statements may rebind (assignments at any depth, not loop targets),
    in order of first appearance."""
    names: Dict[str, None] = {}

    def add_target(target: ast.AST) -> None:
        if isinstance(target, ast.Name):
            names.setdefault(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                add_target(element)

    for statement in statements:
        for node in ast.walk(statement):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    add_target(target)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                add_target(node.target)
    return list(names)


def _is_structured(value: Any) -> bool:
    return not isinstance(value, tl.tensor) and hasattr(type(value), "_flatten")


def _is_runtime(value: Any) -> bool:
    """A value IR control flow carries: a tensor, a structured value of tensors, or a tuple
    holding one of those (its compile-time elements stay compile-time values)."""
    if isinstance(value, (builtins.tuple, builtins.list)):
        return any(_is_runtime(item) for item in value)
    return isinstance(value, tl.tensor) or _is_structured(value)


def _parts(value: Any) -> List[tl.tensor]:
    if isinstance(value, tl.tensor):
        return [value]
    if isinstance(value, (builtins.tuple, builtins.list)):
        return [part for item in value if _is_runtime(item) for part in _parts(item)]
    return value._flatten()


def _shaped_like(template: Any, parts: Any) -> Any:
    """``template`` rebuilt from the iterator ``parts`` (tensors, in _parts order)."""
    if isinstance(template, tl.tensor):
        part = next(parts)
        return tl.tensor(part.handle, template.dtype, template.shape)
    if isinstance(template, (builtins.tuple, builtins.list)):
        from .ast_to_ir import remake
        return remake(template, [_shaped_like(item, parts) if _is_runtime(item) else item
                                 for item in template])
    return template._unflatten([next(parts) for _ in template._flatten()])


def _handles(values: Sequence[Any]) -> List[Any]:
    return [part.handle for value in values for part in _parts(value)]


def _rebuild(templates: Sequence[Any], handles: Sequence[Any]) -> List[Any]:
    """Values shaped like ``templates`` whose parts are ``handles`` (results or arguments)."""
    parts = iter([tl.tensor(handle, part.dtype, part.shape) for handle, part
                  in zip(handles, [p for t in templates for p in _parts(t)])])
    return [_shaped_like(template, parts) for template in templates]


def _add_arguments(block: Any, templates: Sequence[Any]) -> List[Any]:
    return _rebuild(templates, [block.add_argument(part.handle.type)
                                for value in templates for part in _parts(value)])


def _describe(value: Any) -> str:
    return f"a {value}" if _is_runtime(value) else f"the compile-time value {value!r}"


def _same_type(a: Any, b: Any) -> bool:
    sequences = (builtins.tuple, builtins.list)
    if isinstance(a, sequences) or isinstance(b, sequences):  # tuples: element by element
        return (isinstance(a, sequences) and isinstance(b, sequences) and len(a) == len(b)
                and all(_same_type(x, y) if _is_runtime(x) or _is_runtime(y) else x == y
                        for x, y in zip(a, b)))
    if _is_structured(a) or _is_structured(b):
        return type(a) is type(b) and a._type_key() == b._type_key()
    return (isinstance(a, tl.tensor) and isinstance(b, tl.tensor) and a.dtype == b.dtype
            and a.shape == b.shape)


class ControlFlowMixin:
    """if / IfExp / for / while visitors, mixed into CodeGenerator."""

    def _condition(self: "CodeGenerator", cond: tl.tensor, what: str) -> tl.tensor:
        if cond.shape:
            raise TypeError(f"the condition of a runtime {what} must be a scalar, got a tile "
                            f"{cond}")
        return self.semantic.cast(cond, tl.int1)

    def _run_region(self: "CodeGenerator", block: Any, statements: Sequence[ast.stmt],
                    scope: Dict[str, Any], loop: bool = False) -> Dict[str, Any]:
        """Compiles statements into ``block`` (of an if/for/while) in a copy of ``scope``."""
        self.builder.set_insertion_point_to_end(block)
        self.scope = dict(scope)
        self.dynamic_depth += 1
        self.loop_depth += int(loop)
        try:
            self.visit_compound(list(statements))
        finally:
            self.dynamic_depth -= 1
            self.loop_depth -= int(loop)
        return self.scope

    # ---- if ------------------------------------------------------------------------------

    def visit_If(self: "CodeGenerator", node: ast.If) -> None:
        cond = normalize_number(self.visit(node.test))
        if not isinstance(cond, tl.tensor):
            self.visit_compound(node.body if cond else node.orelse)
            return
        if self.is_element_condition(cond):  # in a tl.map_elementwise function
            return self.elementwise_if(node, cond)
        self.runtime_if(node, self._condition(cond, "if"))

    def runtime_if(self: "CodeGenerator", node: ast.If, cond: tl.tensor,
                   else_state: Optional[ReturnState] = None) -> None:
        """An IR if on ``cond``. A branch that returned (early_return.py) adds the returned
        flag and value to what the if yields; ``else_state`` is the state of an else branch
        that returned before the if (guarding the statements after an early return)."""
        if_op = self.builder.create("if", [cond.handle], [], {}, 2)
        liveins = self.scope
        then_scope = self._run_region(if_op.body(0), node.body, liveins)
        then_state = self.take_return_state()
        else_scope = self._run_region(if_op.body(1), node.orelse, liveins)
        earlier_else = else_state is not None
        else_state = else_state or self.take_return_state()
        states = (then_state, else_state)
        # A branch that returned on every path never reaches the statements after the if:
        # what it assigned does not matter there.
        then_scope = dict(liveins) if then_state.kind == DEFINITE else then_scope
        else_scope = dict(liveins) if else_state.kind == DEFINITE else else_scope
        names, then_values, else_values, scope = self._merge_branches(
            node, liveins, then_scope, else_scope, guard=earlier_else)
        returns = self.return_yields(states, earlier_else)
        extra_types = []
        for block, values, state in ((if_op.body(0), then_values, then_state),
                                     (if_op.body(1), else_values, else_state)):
            self.builder.set_insertion_point_to_end(block)
            extra = [] if returns is None else self.branch_return_values(state, *returns)
            extra_types = [(v.handle.type, v.dtype, v.shape) for v in extra]
            self.builder.create("yield", _handles(values) + [v.handle for v in extra], [])
        self.builder.set_insertion_point_after(if_op)
        results = [if_op.add_result(h.type) for h in _handles(then_values)]
        scope.update(zip(names, _rebuild(then_values, results), strict=True))
        self.scope = scope
        if returns is not None:
            results = [tl.tensor(if_op.add_result(ty), dtype, shape)
                       for ty, dtype, shape in extra_types]
            self.set_return_state(states, *returns, results)

    def _merge_branches(self: "CodeGenerator", node: ast.If, liveins: Dict[str, Any],
                        then_scope: Dict[str, Any], else_scope: Dict[str, Any],
                        guard: bool = False
                        ) -> Tuple[List[str], List[tl.tensor], List[tl.tensor], Dict[str, Any]]:
        """The variables a runtime if yields (changed in a branch, or new in both), their
        values per branch, and the scope after the if (without the yielded names yet).

        ``guard``: the if holds the statements after an early return (early_return.py). As in
        Triton, whose tail after ``if c: return`` is straight-line code, those statements may
        give a variable another type (``X = X + offsets`` making a pointer a tile of them);
        such a variable is not carried out of the guard: reading it later is an error."""
        names: List[str] = []
        then_values: List[tl.tensor] = []
        else_values: List[tl.tensor] = []
        scope = dict(liveins)
        line = self.parsed.position(node)[0]
        for name, before in liveins.items():
            if name not in then_scope or name not in else_scope:  # dropped by an inner guard
                scope.pop(name)
                self.partial_defs[name] = f"with another type after the early return before " \
                                          f"line {line}"
                continue
            then_value, else_value = then_scope[name], else_scope[name]
            if then_value is before and else_value is before:
                continue
            if guard and not (_is_runtime(before) and _same_type(then_value, before)
                              and _same_type(else_value, before)):
                scope.pop(name)
                self.partial_defs[name] = f"with another type after the early return before " \
                                          f"line {line}"
                continue
            if not _is_runtime(before):
                raise TypeError(f"'{name}' holds {_describe(before)}; it cannot be reassigned "
                                "under a runtime condition")
            for value, branch in ((then_value, "then"), (else_value, "else")):
                if not _same_type(value, before):
                    raise TypeError(f"'{name}' is {_describe(before)} before the if, but the "
                                    f"{branch} branch assigns {_describe(value)}; a variable "
                                    "keeps its type across a runtime if")
            names.append(name)
            then_values.append(then_value)
            else_values.append(else_value)
        for name in list(then_scope) + list(else_scope):
            if name in liveins or name in names or name in scope:
                continue
            if name not in then_scope or name not in else_scope:
                branch = "then" if name in then_scope else "else"
                self.partial_defs[name] = f"in the {branch} branch of the if at line {line}"
                continue
            then_value, else_value = then_scope[name], else_scope[name]
            if _is_runtime(then_value) or _is_runtime(else_value):
                if not _same_type(then_value, else_value):
                    raise TypeError(f"'{name}' is {_describe(then_value)} in the then branch but "
                                    f"{_describe(else_value)} in the else branch")
                names.append(name)
                then_values.append(then_value)
                else_values.append(else_value)
            elif then_value is else_value or then_value == else_value:
                scope[name] = then_value
            else:
                raise TypeError(f"'{name}' gets different compile-time values in the branches of "
                                "a runtime if")
        return names, then_values, else_values, scope

    def visit_IfExp(self: "CodeGenerator", node: ast.IfExp) -> Any:
        cond = normalize_number(self.visit(node.test))
        if not isinstance(cond, tl.tensor):
            return self.visit(node.body if cond else node.orelse)
        if self.is_element_condition(cond):  # in a tl.map_elementwise function
            return self.elementwise_ifexp(node, cond)
        cond = self._condition(cond, "conditional expression")
        if_op = self.builder.create("if", [cond.handle], [], {}, 2)
        values = []
        for index, branch in enumerate((node.body, node.orelse)):
            self.builder.set_insertion_point_to_end(if_op.body(index))
            self.dynamic_depth += 1
            try:
                values.append(self.sanitize(self.visit(branch)))
            finally:
                self.dynamic_depth -= 1
        if values[0] is None and values[1] is None:
            # Both sides run for their effects (`tl.store(a) if c else tl.store(b)`): an if
            # with no results, as Triton builds it.
            for index in range(2):
                self.builder.set_insertion_point_to_end(if_op.body(index))
                self.builder.create("yield", [], [])
            self.builder.set_insertion_point_after(if_op)
            return None
        if not _same_type(values[0], values[1]):
            raise TypeError("both sides of a conditional expression with a runtime condition "
                            f"must have one type, got {_describe(values[0])} and "
                            f"{_describe(values[1])}")
        for index, value in enumerate(values):
            self.builder.set_insertion_point_to_end(if_op.body(index))
            self.builder.create("yield", _handles([value]), [])
        self.builder.set_insertion_point_after(if_op)
        results = [if_op.add_result(h.type) for h in _handles(values[:1])]
        return _rebuild(values[:1], results)[0]

    # ---- loops ---------------------------------------------------------------------------

    def visit_For(self: "CodeGenerator", node: ast.For) -> None:
        if node.orelse:
            raise self.unsupported(node, "for ... else is not supported")
        iterable: Any
        if isinstance(node.iter, ast.Call):
            function = self.visit(node.iter.func)
            args = self.elements(node.iter.args)
            kwargs = {k.arg: self.visit(k.value) for k in node.iter.keywords if k.arg}
            if function is builtins.range or function is tl.range:
                iterable = tl.range(*args, **kwargs)
            else:
                iterable = self.call(node.iter, function, args, kwargs)
        else:
            iterable = self.visit(node.iter)
        if isinstance(iterable, tl.range):
            return self._runtime_for(node, iterable)
        if isinstance(iterable, tl.static_range):
            return self._static_for(node, list(iterable.values()))
        if isinstance(iterable, (tuple, list, builtins.range)):
            return self._static_for(node, list(iterable))
        raise errors.UnsupportedError(f"cannot iterate over {iterable!r}: use range, tl.range or "
                                      "tl.static_range")

    def _static_for(self: "CodeGenerator", node: ast.For, values: List[Any]) -> None:
        """Unrolls the body; the loop variable is a compile-time value in each copy."""
        for value in values:
            self._bind_static(node.target, value)
            self.visit_compound(node.body)
            if self.returned:
                break

    def _bind_static(self: "CodeGenerator", target: ast.AST, value: Any) -> None:
        if isinstance(target, ast.Name):
            self.scope[target.id] = normalize_number(value)
            self.partial_defs.pop(target.id, None)
        elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (tuple, list)) \
                and len(value) == len(target.elts):
            for element, item in zip(target.elts, value, strict=True):
                self._bind_static(element, item)
        else:
            raise self.unsupported(target, f"cannot bind {value!r} to {ast.unparse(target)}")

    def _loop_bound(self: "CodeGenerator", value: Any, what: str) -> tl.tensor:
        value = normalize_number(value)
        if isinstance(value, bool) or not (isinstance(value, (int, tl.tensor))):
            raise TypeError(f"the {what} of a loop must be an integer, got {value!r}")
        value = self.semantic.to_tensor(value)
        if value.shape or not value.dtype.is_int():
            raise TypeError(f"the {what} of a loop must be an integer scalar, got {value}")
        return value

    def _runtime_for(self: "CodeGenerator", node: ast.For, loop: tl.range) -> None:
        if not isinstance(node.target, ast.Name):
            raise self.unsupported(node.target, "the target of a runtime loop must be a name")
        start, end, step = loop.start, loop.end, normalize_number(loop.step)
        negative = isinstance(step, int) and step < 0
        if isinstance(step, int) and step == 0:
            raise ValueError("range() step must not be zero")
        if negative:  # run the positive range (end, start] and count down from start
            start, end, step = end, start, -step
        bounds = [self._loop_bound(v, w) for v, w in ((start, "start"), (end, "end"),
                                                      (step, "step"))]
        iv_type = integer_promote(integer_promote(bounds[0].dtype, bounds[1].dtype),
                                  bounds[2].dtype)
        lb, ub, stride = [self.semantic.cast(b, iv_type) for b in bounds]
        liveins = self.scope
        carried = [n for n in assigned_names(node.body)
                   if n != node.target.id and _is_runtime(liveins.get(n))]
        attrs = {key: int(value) for key, value in (("num_stages", loop.num_stages),
                                                    ("loop_unroll_factor", loop.loop_unroll_factor))
                 if value is not None}
        if getattr(loop, "warp_specialize", False):  # the pipeliner's producer warpgroup
            attrs["warp_specialize"] = 1
        if getattr(loop, "flatten", False):  # the pipeliner may copy across its iterations
            attrs["flatten"] = 1
        inits = [liveins[n] for n in carried]
        init_handles = _handles(inits)
        for_op = self.builder.create("for", [lb.handle, ub.handle, stride.handle] + init_handles,
                                     [h.type for h in init_handles], attrs, 1)
        body = for_op.body(0)
        iv = tl.tensor(body.add_argument(iv_type.to_ir()), iv_type)
        scope = dict(liveins)
        scope.update(zip(carried, _add_arguments(body, inits), strict=True))
        self.builder.set_insertion_point_to_end(body)
        if negative:
            iv = self.semantic.sub(self.semantic.add(lb, ub), iv)
        scope[node.target.id] = iv
        body_scope = self._run_region(body, node.body, scope, loop=True)
        results = self._carried_values(node, carried, liveins, body_scope, {node.target.id})
        self.builder.create("yield", _handles(results), [])
        self.builder.set_insertion_point_after(for_op)
        self._leave_loop(node, liveins, body_scope, carried, for_op.results, {node.target.id})

    def visit_While(self: "CodeGenerator", node: ast.While) -> None:
        if node.orelse:
            raise self.unsupported(node, "while ... else is not supported")
        liveins = self.scope
        carried = [n for n in assigned_names(node.body) if _is_runtime(liveins.get(n))]
        inits = [liveins[n] for n in carried]
        init_handles = _handles(inits)
        while_op = self.builder.create("while", init_handles, [h.type for h in init_handles],
                                       {}, 2)

        def bind(block: Any) -> Dict[str, Any]:
            scope = dict(liveins)
            scope.update(zip(carried, _add_arguments(block, inits), strict=True))
            return scope

        before_scope = bind(while_op.body(0))
        self.builder.set_insertion_point_to_end(while_op.body(0))
        self.scope = before_scope
        cond = normalize_number(self.visit(node.test))
        if isinstance(cond, compat_types.condition):  # tl.condition(c, disable_licm=...)
            if cond.disable_licm:
                while_op.set_attr("disable_licm", 1)
            cond = normalize_number(cond.condition)
        if not isinstance(cond, tl.tensor):
            if cond:
                raise errors.UnsupportedError("a while loop whose condition is always true never "
                                              "ends (break is not supported)")
            self.builder.set_insertion_point_after(while_op)
            while_op.erase()
            self.scope = liveins
            return
        if self.is_element_condition(cond):
            raise errors.UnsupportedError("a while loop on element values in a "
                                          "tl.map_elementwise function is not supported; use a "
                                          "for loop with a constant bound and a condition")
        cond = self._condition(cond, "while")
        self.builder.create("condition", [cond.handle] + _handles([before_scope[n]
                                                                   for n in carried]), [])
        body_scope = self._run_region(while_op.body(1), node.body, bind(while_op.body(1)),
                                      loop=True)
        results = self._carried_values(node, carried, liveins, body_scope, set())
        self.builder.create("yield", _handles(results), [])
        self.builder.set_insertion_point_after(while_op)
        self._leave_loop(node, liveins, body_scope, carried, while_op.results, set())

    def _carried_values(self: "CodeGenerator", node: ast.stmt, carried: List[str],
                        liveins: Dict[str, Any], body_scope: Dict[str, Any],
                        loop_names: set) -> List[tl.tensor]:
        """The values a loop body yields, checked to keep the type they entered with; and no
        compile-time value may be rebound in the body."""
        for name, before in liveins.items():
            if name not in carried and name not in loop_names and body_scope[name] is not before:
                raise TypeError(f"'{name}' holds {_describe(before)}; it cannot be reassigned "
                                "inside a runtime loop")
        results = []
        for name in carried:
            before, after = liveins[name], body_scope[name]
            if not _same_type(before, after):
                raise TypeError(f"loop-carried variable '{name}' is {_describe(before)} before "
                                f"the loop but {_describe(after)} at the end of its body; a "
                                "variable keeps its type across loop iterations")
            results.append(after)
        return results

    def _leave_loop(self: "CodeGenerator", node: ast.stmt, liveins: Dict[str, Any],
                    body_scope: Dict[str, Any], carried: List[str], results: Sequence[Any],
                    loop_names: set) -> None:
        scope = dict(liveins)
        scope.update(zip(carried, _rebuild([liveins[n] for n in carried], results), strict=True))
        line = self.parsed.position(node)[0]
        for name in body_scope:
            if name not in liveins and name not in loop_names:
                self.partial_defs[name] = f"inside the loop at line {line}"
        self.scope = scope

