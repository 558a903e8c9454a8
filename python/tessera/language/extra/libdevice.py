"""libdevice for kernels: ``tl.extra.cuda.libdevice.<fn>`` / ``tl.extra.libdevice.<fn>`` (Triton's).

Every function of Triton's libdevice module, generated from the one table
(libdevice_table.py): each takes ``arg0, arg1, ...`` (tensors or Python numbers) whose dtypes
must match one of its signatures exactly (fp32 / fp64 for float functions; cast fp16/bf16
first, as in Triton) and calls libdevice's ``__nv_*`` function for them per element.
Example::

    from tessera.language.extra import libdevice
    y = libdevice.tanh(x)            # fp32 x -> __nv_tanhf
    p = libdevice.pow(x, 3)          # (fp32, int32) -> __nv_powif
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Dict

from .. import core
from ..core import builtin
from ..extern import build_extern_elementwise
from .libdevice_table import BOOL_RESULTS, FUNCTIONS, Function

_EXAMPLE_ARGS = {"int32": "i", "uint32": "u", "int64": "n", "uint64": "m", "fp32": "x",
                 "fp64": "d"}


def _dispatch_table(function: Function) -> Dict[tuple, tuple]:
    return {tuple(core.dtype(a) for a in s.args): (s.symbol, core.dtype(s.result))
            for s in function.signatures}


def _docstring(function: Function) -> str:
    lines = [f"libdevice ``{function.name}``: {function.doc}.", "", "Signatures (argument "
             "dtypes -> result dtype, libdevice function):", ""]
    for s in function.signatures:
        result = "int1" if function.name in BOOL_RESULTS else s.result
        lines.append(f"- ({', '.join(s.args)}) -> {result}: ``{s.symbol}``")
    example_args = ", ".join(_EXAMPLE_ARGS[a] for a in function.signatures[0].args)
    lines += ["", f"Example: ``y = libdevice.{function.name}({example_args})``."]
    return "\n".join(lines)


def _make(function: Function) -> Callable:
    """The language function of one table row."""
    parameters = [inspect.Parameter(f"arg{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD)
                  for i in range(function.num_args)]
    parameters.append(inspect.Parameter("_semantic", inspect.Parameter.KEYWORD_ONLY,
                                        default=None))
    signature = inspect.Signature(parameters)
    table = _dispatch_table(function)
    qualified = f"libdevice.{function.name}"

    def call(*args: Any, _semantic: Any = None, **kwargs: Any) -> core.tensor:
        try:
            bound = signature.bind(*args, _semantic=_semantic, **kwargs)
        except TypeError as error:
            raise TypeError(f"{qualified}: {error}") from None
        values = [bound.arguments[f"arg{i}"] for i in range(function.num_args)]
        result = build_extern_elementwise(_semantic, "", "", values, table, True, qualified)
        if function.name in BOOL_RESULTS:
            result = _semantic.cast(result, core.int1)
        return result

    call.__name__ = call.__qualname__ = function.name
    call.__doc__ = _docstring(function)
    call.__module__ = __name__
    call.__signature__ = signature  # type: ignore[attr-defined]
    return builtin(call)


for _function in FUNCTIONS.values():
    globals()[_function.name] = _make(_function)

__all__ = sorted(FUNCTIONS)


def __getattr__(name: str) -> Any:
    # A name Triton's libdevice lacks too: say so plainly (the front end adds the kernel line).
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(f"libdevice has no function '{name}' (Triton's libdevice functions: "
                         "tessera.language.extra.libdevice.__all__)")
