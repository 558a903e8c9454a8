"""Triton's ``triton.compiler.ASTSource`` (also ``triton.compiler.compiler.ASTSource``): a
@jit function and one specialization of it, given as Triton spells it, for ``triton.compile``
(host_api.py) to compile.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

from ..language.core import is_jit


class ASTSource:
    """A @jit function and one specialization of it, as Triton's ``triton.compiler.ASTSource``.

    ``signature``: parameter name -> type string ("*fp32", "i32", "fp16", ...; "constexpr"
    for compile-time parameters); ``constexprs``: name or path tuple (``(2,)``) -> value;
    ``attrs``: path tuple -> list of ``[name, value]``, of which ``tt.divisibility`` 16 and
    ``tt.equal_to`` 1 are what Tessera specializes on.

    Example::

        src = ASTSource(add_kernel, {"x": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                        constexprs={"BLOCK": 256}, attrs={(0,): [["tt.divisibility", 16]]})
    """

    def __init__(self, fn: Any, signature: Dict[str, str], constexprs: Optional[Dict] = None,
                 attrs: Optional[Dict] = None) -> None:
        if not is_jit(fn):
            raise TypeError(f"ASTSource: expected a @jit function, got {fn!r}")
        self.fn = fn
        self.name = fn.__name__
        self.ext = "ttir"
        for key in signature:
            if not isinstance(key, str):
                raise TypeError("ASTSource: signature keys must be parameter names (str)")
        self.signature = dict(signature)
        self.constants: Dict[tuple, Any] = {}
        for key, value in (constexprs or {}).items():
            self.constants[(self._index(key),) if isinstance(key, str) else tuple(key)] = value
        self.attrs = dict(attrs or {})

    def _index(self, name: str) -> int:
        if name not in self.fn.arg_names:
            raise TypeError(f"ASTSource: '{name}' is not a parameter of {self.name}")
        return self.fn.arg_names.index(name)

    def path_name(self, path: tuple) -> str:
        """A path tuple as Tessera names it: ``(1,)`` -> "y", ``(1, 0)`` -> "y.0"."""
        return ".".join([self.fn.arg_names[path[0]], *map(str, path[1:])])

    def specialization(self):
        """(signature, constexprs, divisible by 16, equal to 1) in Tessera's form."""
        signature = {name: ty for name, ty in self.signature.items() if ty != "constexpr"}
        constexprs = {self.path_name(path): value for path, value in self.constants.items()}
        for name in list(signature):
            if name in constexprs:  # a value given for a typed parameter specializes it
                del signature[name]
        div16, eq1 = set(), set()
        for path, pairs in self.attrs.items():
            name = self.path_name(tuple(path))
            for attr, value in pairs:
                if attr == "tt.divisibility" and value % 16 == 0:
                    div16.add(name)
                elif attr == "tt.equal_to" and value == 1:
                    eq1.add(name)
        return signature, constexprs, div16, eq1
