"""``tl.map_elementwise``: a scalar @jit function applied to every element of tiles.

Tessera compiles the scalar function once over whole tiles (its arguments are the broadcast
input tiles) instead of once per element. Control flow on element values becomes per-element
selection, so each element still sees only its own path:

* ``if cond:`` on a tile condition runs both branches, each under a lane mask, then merges
  every variable a branch changed with ``where(cond, then, else)``;
* ``return v`` under a mask records ``v`` for the lanes that are active and have not
  returned yet; the function's value is the merge of its returns (every lane must return on
  some path when any does, as Triton requires one return type);
* ``x if cond else y`` is ``where(cond, x, y)``;
* loads, stores and atomics in a masked branch get the branch's lane mask, so no element
  touches memory its own path would not (a device_print/assert there is an error);
* a ``while`` on a tile condition is not supported (an error says so).

Example::

    @tessera.jit
    def selu_scalar(x, alpha):
        if x > 0:
            return x
        else:
            return alpha * (tl.exp(x) - 1)

    y = tl.map_elementwise(selu_scalar, x, alpha)
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any, Dict, Optional

from .. import errors
from ..language import core as tl

if TYPE_CHECKING:
    from .ast_to_ir import CodeGenerator

# Builtins whose memory effects take the active lanes as their mask; and those that cannot.
_MASKED_MEMORY = ("load", "store", "atomic_add", "atomic_and", "atomic_cas", "atomic_max",
                  "atomic_min", "atomic_or", "atomic_xchg", "atomic_xor")
_UNMASKABLE = ("device_print", "device_assert")


class ElementwiseMixin:
    """Per-element control flow for functions inlined by tl.map_elementwise."""

    # Set by CodeGenerator.__init__ (see there): elementwise mode, the lanes running the
    # current statements (None: all), the caller's lanes (side effects), the lanes that
    # returned and the value returned so far.
    elementwise: bool
    ew_active: Optional[tl.tensor]
    ew_base: Optional[tl.tensor]
    ew_done: Optional[tl.tensor]
    ew_result: Any

    def _and(self: "CodeGenerator", a: Optional[tl.tensor], b: tl.tensor) -> tl.tensor:
        return b if a is None else self.semantic.logical("andi", a, b)

    def ew_lanes(self: "CodeGenerator") -> Optional[tl.tensor]:
        """The lanes side effects may touch here (the caller's and this function's masks)."""
        if self.ew_active is None:
            return self.ew_base
        return self._and(self.ew_base, self.ew_active)

    def is_element_condition(self: "CodeGenerator", cond: Any) -> bool:
        return self.elementwise and isinstance(cond, tl.tensor)

    def _where(self: "CodeGenerator", cond: tl.tensor, a: Any, b: Any, name: str) -> Any:
        if a is b:  # unchanged by either branch
            return a
        if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and len(a) == len(b):
            from .ast_to_ir import remake
            return remake(a, [self._where(cond, x, y, name) for x, y in zip(a, b)])
        if isinstance(a, tl.tensor) and isinstance(b, tl.tensor):
            if a.dtype != b.dtype:
                raise TypeError(f"Mismatched type for {name} between then block ({a.dtype}) "
                                f"and else block ({b.dtype})")
            return self.semantic.where(cond, a, b)
        if a is b or (not isinstance(a, tl.tensor) and not isinstance(b, tl.tensor) and a == b):
            return a
        raise TypeError(f"{name} gets different values {a!r} and {b!r} on the two sides of a "
                        "condition on element values")

    def elementwise_if(self: "CodeGenerator", node: ast.If, cond: tl.tensor) -> None:
        """Both branches, each under its lanes; variables merged with where(cond, ...)."""
        cond = self.semantic.cast(cond, tl.int1)
        outer = self.ew_active
        liveins = self.scope
        results = []
        for statements, lanes in ((node.body, cond), (node.orelse,
                                                      self.semantic.logical_not(cond))):
            self.scope = dict(liveins)
            self.ew_active = self._and(outer, lanes)
            self.visit_compound(statements)
            results.append((self.scope, self.returned))
            self.returned = False
        self.ew_active = outer
        (then_scope, then_returned), (else_scope, else_returned) = results
        scope: Dict[str, Any] = dict(liveins)
        for name in dict.fromkeys(list(then_scope) + list(else_scope)):
            in_then, in_else = name in then_scope, name in else_scope
            if then_returned and in_else:  # the then lanes are done: their values are unused
                scope[name] = else_scope[name]
            elif else_returned and in_then:
                scope[name] = then_scope[name]
            elif in_then and in_else:
                scope[name] = self._where(cond, then_scope[name], else_scope[name], f"'{name}'")
        self.scope = scope
        self.returned = then_returned and else_returned

    def elementwise_ifexp(self: "CodeGenerator", node: ast.IfExp, cond: tl.tensor) -> Any:
        cond = self.semantic.cast(cond, tl.int1)
        body = self.sanitize(self.visit(node.body))
        orelse = self.sanitize(self.visit(node.orelse))
        return self._where(cond, body, orelse, "a conditional expression")

    def elementwise_return(self: "CodeGenerator", value: Any) -> None:
        """Records ``value`` for the lanes running here that have not returned yet."""
        lanes = self.ew_active
        if self.ew_result is None:
            self.ew_result = value
        else:
            pending = self.semantic.logical_not(self.ew_done) if self.ew_done is not None \
                else None
            take = self._and(lanes, pending) if pending is not None else lanes
            if take is None:  # every lane, none returned before: cannot happen past a return
                self.ew_result = value
            else:
                self.ew_result = self._where(take, value, self.ew_result, "the return value")
        if lanes is not None:
            self.ew_done = lanes if self.ew_done is None else \
                self.semantic.logical("ori", self.ew_done, lanes)
        self.returned = True

    def elementwise_call_check(self: "CodeGenerator", function: Any,
                               kwargs: Dict[str, Any]) -> None:
        """Masks memory effects to the active lanes; refuses prints and asserts there."""
        lanes = self.ew_lanes()
        if lanes is None:
            return
        name = getattr(function, "__name__", "")
        if function is getattr(tl, name, None) and name in _UNMASKABLE:
            raise errors.UnsupportedError(f"tl.{name} under a condition on element values in a "
                                          "tl.map_elementwise function is not supported")
        if name in _MASKED_MEMORY and getattr(tl, name, None) is function:
            mask = kwargs.get("mask")
            kwargs["mask"] = lanes if mask is None else self.semantic.logical("andi", lanes,
                                                                              mask)

    def call_elementwise(self: "CodeGenerator", scalar_fn: Any, inputs: list) -> Any:
        """Inlines ``scalar_fn`` over the input tiles in elementwise mode (see the module
        docstring); tl.map_elementwise calls it on the generator it is given."""
        from .ast_to_ir import CodeGenerator
        from .source import is_jit, kernel_parameters
        if not is_jit(scalar_fn):
            raise TypeError(f"map_elementwise needs a @jit scalar function, got {scalar_fn!r}")
        fn = scalar_fn.fn
        params = kernel_parameters(fn)
        if len(params) < len(inputs):
            raise TypeError(f"{fn.__name__}() takes {len(params)} arguments, map_elementwise "
                            f"gives it {len(inputs)}")
        import inspect
        bound = inspect.signature(fn).bind(*inputs)
        bound.apply_defaults()
        scope = dict(bound.arguments)
        callee = CodeGenerator(self.ctx, self.ctx.parse(fn), scope, is_kernel=False)
        callee.elementwise = True
        callee.ew_base = self.ew_lanes() if self.elementwise else None
        callee.ew_shape = list(inputs[0].shape) if inputs else []
        callee.loc = self.loc
        return self.inline_callee(fn, callee, f"{fn.__name__}(), mapped elementwise")
