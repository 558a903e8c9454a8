"""The floors of python/tessera (docs/architecture.md, "Floors"): every import of the package
runs down.

A room is a top-level file or folder of the package; the table in docs/architecture.md gives
each room its floor. Every import (at module level or inside a function, and
``importlib.import_module`` of a literal name) from one room to another must name a room on a
lower floor, except the few the document names, listed here too. A room missing from the table
(a new module) fails, so the table stays current.
"""
import ast
import os
import re
from typing import Dict, Iterator, Set, Tuple

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))))
PACKAGE = os.path.join(ROOT, "python", "tessera")
DOC = os.path.join(ROOT, "docs", "architecture.md")

# (importing file, imported room) that run up, each for a public path Triton code uses (the
# document says why). An entry no import needs any more fails too: delete it, and its words.
UPWARD = {
    ("runtime/jit.py", "jit.py"),               # triton.runtime.jit
    ("runtime/autotuner.py", "autotuner/"),     # triton.runtime.autotuner
    ("testing/libdevice_cases.py", "__init__.py"),  # @tessera.jit kernels for the GPU tests
}


def floors() -> Dict[str, int]:
    """room -> floor, from the table of the document's "Floors" section."""
    with open(DOC) as f:
        text = f.read()
    section = text[text.index("\n## Floors\n"):]
    section = section[:section.index("\n## ", 1)]
    table: Dict[str, int] = {}
    for line in section.splitlines():
        match = re.match(r"\|\s*(\d+)\s*\|([^|]*)\|", line)
        if match:
            for room in re.findall(r"`([^`]+)`", match.group(2)):
                assert room not in table, f"{room} is on two floors of {DOC}"
                table[room] = int(match.group(1))
    return table


def rooms() -> Set[str]:
    """The package's top-level files and folders (the binding: ``_tessera``)."""
    found = {"_tessera"}
    for name in os.listdir(PACKAGE):
        path = os.path.join(PACKAGE, name)
        if name.endswith(".py"):
            found.add(name)
        elif os.path.isdir(path) and name not in ("__pycache__", "_lib", "_tessera") and any(
                f.endswith(".py") for _, _, files in os.walk(path) for f in files):
            found.add(name + "/")
    return found


def room_of(module: str) -> str:
    """The room of a module of the package ("tessera.runtime.driver" -> "runtime/")."""
    parts = module.split(".")
    assert parts[0] == "tessera", module
    if len(parts) == 1:
        return "__init__.py"
    if parts[1] == "_tessera":
        return "_tessera"
    return parts[1] + "/" if os.path.isdir(os.path.join(PACKAGE, parts[1])) else parts[1] + ".py"


def imports(relative: str) -> Iterator[Tuple[str, int]]:
    """(imported module of the package, line) of every import in one file."""
    with open(os.path.join(PACKAGE, relative)) as f:
        tree = ast.parse(f.read())
    package = ["tessera"] + relative.split("/")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "tessera":
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.split(".")[0] != "tessera":
                continue
            for alias in node.names:
                # `from .. import errors` imports a module; `from ..errors import X` a name.
                submodule = f"{module}.{alias.name}"
                parts = submodule.split(".")
                is_module = len(parts) == 2 and (
                    os.path.exists(os.path.join(PACKAGE, parts[1] + ".py"))
                    or os.path.isdir(os.path.join(PACKAGE, parts[1])))
                yield (submodule if is_module else module), node.lineno
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)
              and str(node.args[0].value).startswith("tessera")):
            yield node.args[0].value, node.lineno


def files() -> Iterator[str]:
    for directory, folders, names in os.walk(PACKAGE):
        folders[:] = [f for f in folders if f not in ("__pycache__", "_lib")]
        for name in names:
            if name.endswith(".py"):
                yield os.path.relpath(os.path.join(directory, name), PACKAGE)


def test_every_room_has_a_floor():
    table, present = floors(), rooms()
    assert not present - set(table), f"rooms without a floor in {DOC}: {present - set(table)}"
    assert not set(table) - present, f"{DOC} names rooms that are gone: {set(table) - present}"


def test_every_import_runs_down():
    table = floors()
    upward, wrong = set(), []
    for relative in files():
        source_room = relative.split("/")[0] + ("/" if "/" in relative else "")
        for module, line in imports(relative):
            target = room_of(module)
            if target == source_room or table[source_room] > table[target]:
                continue
            if (relative, target) in UPWARD:
                upward.add((relative, target))
                continue
            wrong.append(f"{relative}:{line} (floor {table[source_room]}) imports {module} "
                         f"(floor {table[target]})")
    assert not wrong, "imports that run up or sideways:\n" + "\n".join(sorted(wrong))
    assert upward == UPWARD, f"no longer needed, remove: {UPWARD - upward}"


@pytest.mark.parametrize("module, room", [("tessera", "__init__.py"),
                                          ("tessera.runtime.driver", "runtime/"),
                                          ("tessera.jit", "jit.py"),
                                          ("tessera._tessera.ir", "_tessera")])
def test_room_of(module, room):
    assert room_of(module) == room
