"""Importing a tutorial's kernels for tests and benchmarks.

Tutorials are notebooks: their checks and benchmarks run as top-level cells, so importing a
whole tutorial would run them. ``load_tutorial_section`` imports only the source between two
markers (the kernels and host wrappers), written to a file whose line numbers match the
tutorial's, so kernel error messages still point at the tutorial's lines.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
import types
from typing import Optional

TUTORIALS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))), "tutorials")


def _find_tutorial(filename: str, caller: Optional[str]) -> str:
    """tutorials/<filename> of the checkout: beside python/ for an in-tree build; for an
    installed package (which holds no tutorials), the first tutorials/ found upward from the
    calling test or benchmark, then from the current directory."""
    starts = [os.path.dirname(os.path.abspath(caller))] if caller else []
    starts.append(os.getcwd())
    candidates = [os.path.join(TUTORIALS, filename)]
    for start in starts:
        folder = start
        while True:
            candidates.append(os.path.join(folder, "tutorials", filename))
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
    for path in candidates:
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"tutorials/{filename} not found beside the tessera package, above "
                            f"{starts[0]} or the current directory")

_PRELUDE = "import numpy as np\nimport tessera\nimport tessera.language as tl\n"


def load_tutorial_section(filename: str, start: str, end: str,
                          after: Optional[str] = None) -> types.ModuleType:
    """Imports tutorials/<filename> from the first ``start`` marker (searched from ``after``
    when given) up to the next ``end`` marker, with numpy, tessera and tl imported."""
    with open(_find_tutorial(filename, sys._getframe(1).f_globals.get("__file__"))) as f:
        source = f.read()
    begin = source.index(start)
    stop = source.index(end, source.index(after) if after else begin)
    line = source.count("\n", 0, begin)  # keep the tutorial's line numbers
    text = _PRELUDE + "\n" * (line - _PRELUDE.count("\n")) + source[begin:stop]
    directory = tempfile.mkdtemp(prefix="tessera-tutorial-")
    name = "tutorial_" + os.path.splitext(os.path.basename(filename))[0].replace("-", "_")
    path = os.path.join(directory, name + ".py")
    with open(path, "w") as f:
        f.write(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    # Registered, so that what pickles or re-imports by module name (torch.compile tracing a
    # tutorial's custom op) finds it.
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
