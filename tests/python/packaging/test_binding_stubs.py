"""The binding's type stubs (tessera/_tessera/*.pyi, written by scripts/gen_binding_stubs.py)
against the binding Python imports: every public function, class and class member of each
submodule is in the stubs, and the stubs name nothing the binding lacks. Under `make test` the
package is the pip-installed one, so this also shows the wheel ships the stubs.
"""
import ast
import inspect
from pathlib import Path

import pytest
import tessera
from tessera import _tessera

STUBS = Path(tessera.__file__).resolve().parent / "_tessera"
SUBMODULES = sorted(name for name, value in vars(_tessera).items()
                    if inspect.ismodule(value) and not name.startswith("_"))


def stub_names(tree: ast.Module) -> set:
    """Public top-level names of a stub and ``Class.member`` for the members of its classes."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            for member in node.body:
                target = member.target if isinstance(member, ast.AnnAssign) else member
                name = getattr(target, "name", getattr(target, "id", None))
                if name and not name.startswith("_"):
                    names.add(f"{node.name}.{name}")
    return names


def binding_names(module) -> set:
    """The same for the compiled submodule: its public attributes and each class's own members."""
    names = set()
    for name, value in vars(module).items():
        if name.startswith("_") or inspect.ismodule(value):
            continue
        names.add(name)
        if inspect.isclass(value):
            names |= {f"{name}.{member}" for member in vars(value) if not member.startswith("_")}
    return names


def test_the_binding_has_the_submodules_the_stubs_describe():
    assert SUBMODULES == ["codegen", "ir", "passes", "runtime"]
    package = ast.parse((STUBS / "__init__.pyi").read_text())
    imported = {alias.name for node in package.body
                if isinstance(node, ast.ImportFrom) and node.level == 1
                for alias in node.names}
    assert imported == set(SUBMODULES)


@pytest.mark.parametrize("submodule", SUBMODULES)
def test_the_stub_lists_every_public_name(submodule):
    stub = STUBS / f"{submodule}.pyi"
    assert stub.is_file(), f"{stub} missing: run scripts/gen_binding_stubs.py"
    stubbed = stub_names(ast.parse(stub.read_text()))
    bound = binding_names(getattr(_tessera, submodule))
    assert not bound - stubbed, (f"in _tessera.{submodule} but not in {stub.name} (rerun "
                                 f"scripts/gen_binding_stubs.py): {sorted(bound - stubbed)}")
    assert not stubbed - bound, (f"in {stub.name} but gone from _tessera.{submodule}: "
                                 f"{sorted(stubbed - bound)}")


def test_stubs_name_python_types_not_cpp_ones():
    for stub in STUBS.glob("*.pyi"):
        text = stub.read_text()
        assert "::" not in text and "-> ...:" not in text, stub.name
