"""The compiler build id (part of every disk cache key) covers every Python source that makes a
kernel's code, in every subfolder: an edit of language/extra/ (the libdevice table, the custom
float8 conversions) must not let a warm disk cache serve cubins built from the old code. Checked
on a copy of the installed package tree, edited file by file."""
import os
import shutil

import pytest

import tessera
from tessera.runtime import launcher

PACKAGE = os.path.dirname(tessera.__file__)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """A copy of the package's Python sources (no binaries, no bytecode)."""
    copy = tmp_path_factory.mktemp("package") / "tessera"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("*.so", "_lib", "__pycache__",
                                                                 "*.pyc"))
    return copy


def edited(tree, relative, text="\n# an edit\n"):
    """The digest of ``tree`` with ``text`` appended to one file, the file restored after."""
    path = tree / relative
    original = path.read_bytes()
    try:
        path.write_bytes(original + text.encode())
        return launcher.python_sources_digest(tree)
    finally:
        path.write_bytes(original)


def test_the_copy_has_the_same_digest_as_the_package(tree):
    assert launcher.python_sources_digest(tree) == launcher.python_sources_digest()


@pytest.mark.parametrize("relative", [
    "language/extra/libdevice_table.py",     # the libdevice name table
    "language/extra/cuda/custom_float8.py",  # the custom float8 conversions
    "language/core.py", "frontend/ast_to_ir.py", "compiler/compiler.py",
    "specialization.py", "launch_options.py", "runtime/tuple_arguments.py",
])
def test_an_edit_of_a_compiler_source_changes_the_key(tree, relative):
    assert (tree / relative).is_file(), relative
    assert edited(tree, relative) != launcher.python_sources_digest(tree)


def test_a_new_file_in_a_new_subfolder_changes_the_key(tree):
    before = launcher.python_sources_digest(tree)
    folder = tree / "language" / "extra" / "new_target"
    folder.mkdir()
    try:
        (folder / "__init__.py").write_text("TABLE = {}\n")
        assert launcher.python_sources_digest(tree) != before
    finally:
        shutil.rmtree(folder)
    assert launcher.python_sources_digest(tree) == before


@pytest.mark.parametrize("relative", ["ops/gemm.py", "interpreter/evaluator.py",
                                      "testing/bench.py", "autotuner/tuner.py"])
def test_folders_that_make_no_code_are_left_out(tree, relative):
    # Kernels of tessera.ops enter their own source key; the interpreter makes no cubin.
    assert edited(tree, relative) == launcher.python_sources_digest(tree)


def test_the_build_id_holds_the_digest(monkeypatch):
    launcher.compiler_build_id.cache_clear()
    try:
        before = launcher.compiler_build_id()
        monkeypatch.setattr(launcher, "python_sources_digest", lambda: "another digest")
        launcher.compiler_build_id.cache_clear()
        assert launcher.compiler_build_id() != before
    finally:
        monkeypatch.undo()
        launcher.compiler_build_id.cache_clear()
