"""The digest of the package's Python sources that make a kernel's code: part of the
compiler build id (launcher.compiler_build_id), computed ahead by runtime/prewarm.py."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent


# Folders of the package that take no part in making a kernel's code, left out of the build
# id: the CPU interpreter (runs tile IR, makes no cubin), the kernel library (each kernel's
# source enters its own source key, and the constexprs its host code picks are in the cache key
# too), the autotuner (chooses among configs, whose values are in the key) and the benchmark
# helpers. Every other Python file counts, in every subfolder (language/extra/: the libdevice
# table, the float8 conversions), and so does a folder added later.
_NOT_COMPILING = ("interpreter", "ops", "autotuner", "testing")


def python_sources_digest(package: Path = _PACKAGE) -> str:
    """SHA-256 of the package's Python sources that feed compilation (each file's path
    relative to ``package`` and its bytes): any edit of one makes a new build id."""
    files = []
    for directory, folders, names in os.walk(package):
        if directory == str(package):  # os.walk descends only into the folders left here
            folders[:] = [f for f in folders if f not in _NOT_COMPILING]
        folders[:] = [f for f in folders if f != "__pycache__"]
        relative = os.path.relpath(directory, package)
        files += [(os.path.normpath(os.path.join(relative, name)), os.path.join(directory, name))
                  for name in names if name.endswith(".py")]
    digest = hashlib.sha256()
    for relative, path in sorted(files):
        with open(path, "rb") as source:
            data = source.read()
        digest.update(f"{relative}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()
