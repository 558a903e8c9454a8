"""Loads the compatibility kernels as Tessera code (as written) or as Triton code (the same
text with only its import lines changed from ``tessera`` to ``triton``)."""
import importlib
import os
import re
import sys
import tempfile
from types import ModuleType

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(HERE, "kernels")
_IMPORT = re.compile(r"^(\s*(?:import|from)\s+)tessera\b", re.MULTILINE)


def module_names():
    sys.path.insert(0, os.path.dirname(HERE))
    from compat.kernels import MODULES
    return list(MODULES)


def load_tessera(name: str) -> ModuleType:
    """The kernel module as written (``import tessera as triton``)."""
    if os.path.dirname(HERE) not in sys.path:
        sys.path.insert(0, os.path.dirname(HERE))
    return importlib.import_module(f"compat.kernels.{name}")


def to_triton(text: str) -> str:
    """The same source with its import lines pointing at Triton instead of Tessera."""
    return _IMPORT.sub(lambda m: m.group(1) + "triton", text)


_triton_root = None


def load_triton(name: str) -> ModuleType:
    """The kernel module with only its imports changed, as package ``compat_triton``; Triton
    reads kernel sources from files, so the rewritten text is written to a temporary folder."""
    global _triton_root
    if _triton_root is None:
        _triton_root = tempfile.mkdtemp(prefix="tessera-compat-")
        package = os.path.join(_triton_root, "compat_triton")
        os.makedirs(package)
        for file in os.listdir(KERNELS):
            if file.endswith(".py"):
                with open(os.path.join(KERNELS, file)) as source:
                    text = to_triton(source.read())
                with open(os.path.join(package, file), "w") as target:
                    target.write(text)
        sys.path.insert(0, _triton_root)
    return importlib.import_module(f"compat_triton.{name}")
