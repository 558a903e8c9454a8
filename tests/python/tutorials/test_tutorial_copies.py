"""The tutorials' kernels that are also tessera.ops kernels stay the same code.

A tutorial teaches a kernel by writing it out; the library launches its own copy. Every
@jit function of a tutorial whose name is a @jit function of ``tessera.ops`` must be the same
code as it: the same syntax tree, docstring and comments aside, and every module-level constant
both read under one name (``LOG2E = 1.44...``, ``SUPER: tl.constexpr = 128``) the same value.
A fix made in one place and not the other fails here. The tutorials' own kernels (vector add,
dropout, the masked-attention walkthrough) have no library twin and are not compared.
"""
import ast
import copy
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
TUTORIALS = sorted((ROOT / "tutorials").glob("[0-9][0-9]-*.py"))
LIBRARY = sorted((ROOT / "python" / "tessera" / "ops").rglob("*.py"))


def _is_jit(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return ast.unparse(target).split(".")[-1] == "jit"


def kernels(path: Path) -> dict:
    """{name: (code without decorators and docstring, global names it reads)} of the
    module-level @jit functions of ``path``."""
    found = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef) and any(map(_is_jit, node.decorator_list)):
            node = copy.deepcopy(node)
            node.decorator_list = []
            first = node.body[0] if node.body else None
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                node.body = node.body[1:]
            reads = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            found[node.name] = (ast.unparse(node), reads)
    return found


def constants(path: Path) -> dict:
    """{name: value text} of the module-level assignments of ``path`` (annotated too)."""
    found = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                node.targets[0], ast.Name):
            found[node.targets[0].id] = ast.unparse(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and \
                node.value is not None:
            found[node.target.id] = ast.unparse(node.value)
    return found


@functools.lru_cache(maxsize=None)
def library_kernels() -> dict:
    """{name: [(path, code, reads)]} of tessera.ops' @jit functions."""
    table: dict = {}
    for path in LIBRARY:
        for name, (code, reads) in kernels(path).items():
            table.setdefault(name, []).append((path, code, reads))
    return table


COPIES = [(tutorial, name) for tutorial in TUTORIALS for name in kernels(tutorial)
          if name in library_kernels()]


def test_the_tutorials_copy_library_kernels():
    # Tutorials 02, 03, 05, 06 and 07 write out kernels tessera.ops launches.
    assert {t.name[:2] for t, _ in COPIES} >= {"02", "03", "05", "06", "07"}
    assert len(COPIES) >= 20


@pytest.mark.parametrize("tutorial, name", COPIES,
                         ids=[f"{t.name[:2]}-{n}" for t, n in COPIES])
def test_a_tutorial_kernel_is_the_library_kernel(tutorial, name):
    code, reads = kernels(tutorial)[name]
    twins = library_kernels()[name]
    same = [(path, lib_reads) for path, lib_code, lib_reads in twins if lib_code == code]
    assert same, (f"{tutorial.name}: {name} differs from tessera.ops' "
                  f"({', '.join(str(p.relative_to(ROOT)) for p, _, _ in twins)}): change both")
    ours = constants(tutorial)
    for path, lib_reads in same:
        theirs = constants(path)
        for global_name in sorted(reads & lib_reads & ours.keys() & theirs.keys()):
            assert ours[global_name] == theirs[global_name], (
                f"{tutorial.name}: {name} reads {global_name} = {ours[global_name]}, "
                f"{path.relative_to(ROOT)} = {theirs[global_name]}")


def test_a_changed_copy_is_caught(tmp_path):
    # The check itself: one operator changed in a copy of tutorial 05 is a different kernel.
    source = (ROOT / "tutorials" / "05-rms-norm.py").read_text()
    changed = tmp_path / "05-rms-norm.py"
    changed.write_text(source.replace("* rstd", "/ rstd", 1))
    assert "/ rstd" in changed.read_text()
    edited = {n for n, (code, _) in kernels(changed).items()
              if code != kernels(ROOT / "tutorials" / "05-rms-norm.py")[n][0]}
    assert len(edited) == 1
    name = edited.pop()
    assert all(code != kernels(changed)[name][0] for _, code, _ in library_kernels()[name])
