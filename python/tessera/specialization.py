"""``tessera.specialization``: how a kernel call is specialized (argument keys, ``describe``),
which lives in runtime/specialization.py beside the tuple and descriptor arguments it
dispatches to; this path is that very module.
Example: ``from tessera.specialization import argument_key; argument_key(7)``."""
import sys

from .runtime import specialization as _specialization

sys.modules[__name__] = _specialization
