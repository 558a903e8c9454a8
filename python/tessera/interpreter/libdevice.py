"""Interpreter handler of ``extern_elementwise`` (ops.def): libdevice's functions, by symbol.

The op's ``symbol`` attribute is looked up in the libdevice table
(language/extra/libdevice_table.py), which gives the signature (how to read the operands:
uint32 operands are the same bits as the IR's signless i32) and the reference that computes
the function exactly (libdevice_ref.py). A symbol outside the table (a user's own extern
library) cannot run in the interpreter: the plan says so, naming the symbol.
"""
from __future__ import annotations

import numpy as np

from ..language.extra.libdevice_table import BY_SYMBOL
from .handlers import handles
from .libdevice_ref import reference
from .plan import OpInfo, PlanError

_NUMPY = {"int32": np.dtype(np.int32), "uint32": np.dtype(np.uint32),
          "int64": np.dtype(np.int64), "uint64": np.dtype(np.uint64),
          "fp32": np.dtype(np.float32), "fp64": np.dtype(np.float64)}


@handles("extern_elementwise")
def _extern_elementwise(info: OpInfo):
    symbol = info.attrs.get("symbol", "")
    if symbol not in BY_SYMBOL:
        raise PlanError(f"extern_elementwise: the interpreter cannot run the external function "
                        f"'{symbol}' (it runs libdevice's functions, the table of "
                        "tessera.language.extra.libdevice); run this kernel on the GPU")
    function, signature = BY_SYMBOL[symbol]
    arguments = [_NUMPY[name] for name in signature.args]
    result = _NUMPY[signature.result]
    if len(info.operands) != len(arguments):
        raise PlanError(f"extern_elementwise {symbol} takes {len(arguments)} operands, got "
                        f"{len(info.operands)}")
    for operand, expected in zip([*info.operands, *info.results], [*arguments, result]):
        if operand.dtype.itemsize != expected.itemsize or (operand.dtype.kind == "f") != (
                expected.kind == "f"):
            raise PlanError(f"extern_elementwise {symbol} ({', '.join(signature.args)}) -> "
                            f"{signature.result} does not take {operand.text}")
    compute = reference(function.reference)
    storage = info.results[0].dtype

    def run(state, *values):
        args = [np.asarray(v).view(d) for v, d in zip(values, arguments)]
        return np.asarray(compute(args, result)).astype(result, copy=False).view(storage)

    return run
