"""Console scripts of the installed package (pyproject.toml's [project.scripts]).

``tessera-opt`` runs the C++ driver shipped inside the package (tessera/_bin/tessera-opt, next
to the binding, whose folder also holds _lib/libtessera_core.so); ``tessera-cache`` is
``python -m tessera.cache``.

Example (a shell)::

    tessera-opt kernel.ir --canonicalize --cse
    tessera-cache size
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import List


def _opt_candidates() -> List[Path]:
    """Where tessera-opt may be: beside the compiled binding (a pip install, also an editable
    one, whose Python files stay in the checkout), then beside this file."""
    places = []
    try:
        from . import _tessera
        places.append(Path(_tessera.__file__).resolve().parent / "_bin" / "tessera-opt")
    except ImportError:
        pass
    places.append(Path(__file__).resolve().parent / "_bin" / "tessera-opt")
    return places


def tessera_opt() -> None:
    """Replaces this process with the packaged tessera-opt, passing the arguments on."""
    for binary in _opt_candidates():
        if binary.is_file() and os.access(binary, os.X_OK):
            os.execv(str(binary), [str(binary), *sys.argv[1:]])
    tried = ", ".join(str(p) for p in _opt_candidates())
    sys.exit(f"tessera-opt: not part of this installation (looked at {tried}); "
             "reinstall with `pip install .`, or use build/bin/tessera-opt of an in-tree build")


def tessera_cache() -> None:
    """``tessera-cache list|size|clear``: the on-disk cache tool."""
    from .cache import main
    sys.exit(main())
