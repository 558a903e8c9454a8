"""Every kernel a tutorial writes out under the name of a tessera.ops kernel is that kernel:
the same code (compared as Python ASTs, docstrings left out), so the tutorials teach what the
library runs and neither side drifts. The tutorials' host wrappers may be simpler than the
library's (no autograd op, no autotuning); their kernels may not differ. A tutorial that wants
its own variant gives it a name of its own."""
import ast
import importlib
import inspect
import pkgutil
import textwrap
from pathlib import Path

import tessera.ops

TUTORIALS = Path(__file__).resolve().parents[3] / "tutorials"


def _without_docstrings(node: ast.AST) -> str:
    for inner in ast.walk(node):
        body = getattr(inner, "body", None)
        if (isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            inner.body = body[1:]
    return ast.dump(node)


def _is_jit(node: ast.FunctionDef) -> bool:
    return any("jit" in ast.dump(d) for d in node.decorator_list)


def _kernels(tree: ast.Module) -> dict:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef) and _is_jit(n)}


def library_kernels() -> dict:
    """name -> (module, AST) of every @jit function defined at the top of a tessera.ops module."""
    found = {}
    for info in pkgutil.walk_packages(tessera.ops.__path__, "tessera.ops."):
        module = importlib.import_module(info.name)
        tree = ast.parse(textwrap.dedent(inspect.getsource(module)))
        for name, node in _kernels(tree).items():
            found[name] = (info.name, node)
    return found


def test_each_tutorial_kernel_named_as_a_library_kernel_is_the_same_code():
    library = library_kernels()
    compared, differ = [], []
    for path in sorted(TUTORIALS.glob("[0-9]*.py")):
        for name, node in _kernels(ast.parse(path.read_text())).items():
            if name not in library:
                continue
            compared.append(f"{path.name}:{name}")
            if _without_docstrings(node) != _without_docstrings(library[name][1]):
                differ.append(f"{path.name}: {name} differs from {library[name][0]}.{name}")
    assert not differ, "\n".join(differ)
    # Softmax, matmul, the norms and attention forward and backward are copied today: a
    # rename on either side must not quietly leave nothing to compare.
    assert len(compared) >= 19, compared


def test_the_comparison_sees_a_changed_line(tmp_path):
    """The check is not blind: one changed operator in a kernel makes the ASTs differ."""
    source = (TUTORIALS / "05-rms-norm.py").read_text()
    changed = source.replace("/ n_cols + eps", "/ n_cols - eps", 1)
    assert changed != source
    before = _kernels(ast.parse(source))["rms_norm_fwd"]
    after = _kernels(ast.parse(changed))["rms_norm_fwd"]
    assert _without_docstrings(before) != _without_docstrings(after)
