"""The table of Triton's public names (tessera/_triton_api.py): statuses are computed from what
Tessera defines, docs/triton-compat.md is generated from it and current, and inside a kernel a
Triton name Tessera lacks is a compilation error at its source line that names it."""
import os
import subprocess
import sys

import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera import _triton_api
from tessera.errors import UnsupportedLanguageConstruct
from tessera.testing.environment import child_env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def test_the_doc_page_is_current():
    done = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gen_triton_compat.py"),
                           "--check"], capture_output=True, text=True,
                          env=child_env())
    assert done.returncode == 0, done.stderr + " (run scripts/gen_triton_compat.py)"


def test_status_is_computed_from_what_tessera_defines(monkeypatch):
    rows = {(ns, name): status for ns, name, status, _ in _triton_api.table()}
    assert rows["triton", "next_power_of_2"] == "supported"
    assert rows["triton.language", "load"] == "supported"
    assert rows["triton.language.tensor", "dtype"] == "supported"
    assert rows["triton.testing", "assert_close"] == "supported"
    # A name another module adds shows up as supported without touching the table.
    name = first_missing("triton.language", monkeypatch)
    assert _triton_api.status("triton.language", name) == "not yet"
    monkeypatch.setattr(tl, name, lambda *a, **k: None, raising=False)
    assert _triton_api.status("triton.language", name) == "supported"


def test_every_namespace_has_names():
    names = _triton_api.names()
    assert len(names["triton.language"]) > 100 and "program_id" in names["triton.language"]
    assert "next_power_of_2" in names["triton"] and "do_bench" in names["triton.testing"]


def kernel_using(expression: str):
    """A kernel whose source uses `expression` on line 3 of its text."""
    text = ("def uses(x_ptr, BLOCK: tl.constexpr):\n"
            "    offs = tl.arange(0, BLOCK)\n"
            f"    y = {expression}\n"
            "    tl.store(x_ptr + offs, y)\n")
    namespace = {"tl": tl}
    exec(compile(text, "<uses>", "exec"), namespace)
    kernel = tessera.jit(namespace["uses"], interpret=True)
    kernel._unsafe_update_src(text)
    return kernel


def first_missing(namespace, monkeypatch=None):
    """A Triton name Tessera lacks; when every tl name is supported, one taken away for the
    test (so the error path stays tested)."""
    for name in _triton_api.names()[namespace]:
        if _triton_api.status(namespace, name) == "not yet":
            return name
    if namespace == "triton.language" and monkeypatch is not None:
        monkeypatch.delattr(tl, "map_elementwise")
        return "map_elementwise"
    pytest.skip(f"every name of {namespace} is supported")


def test_a_missing_tl_function_in_a_kernel_names_it_at_its_line(monkeypatch):
    name = first_missing("triton.language", monkeypatch)
    kernel = kernel_using(f"tl.{name}(tl.load(x_ptr + offs))")
    with pytest.raises(UnsupportedLanguageConstruct) as info:
        kernel[(1,)](np.zeros(8, np.float32), BLOCK=8)
    error = info.value
    assert f"triton.language.{name} is a Triton API that Tessera does not support" in str(error)
    assert error.kernel_name == "uses" and error.source_line.strip().startswith("y = tl.")
    assert isinstance(error, tessera.TritonError)


def test_a_missing_tensor_method_in_a_kernel_names_it_at_its_line():
    name = first_missing("triton.language.tensor")
    kernel = kernel_using(f"tl.load(x_ptr + offs).{name}()")
    with pytest.raises(UnsupportedLanguageConstruct, match=rf"tensor\.{name} .*Triton API") as \
            info:
        kernel[(1,)](np.zeros(8, np.float32), BLOCK=8)
    assert "y = tl.load(x_ptr + offs)" in info.value.source_line


def test_an_unknown_name_in_a_kernel_is_still_a_compilation_error_with_its_line():
    kernel = kernel_using("tl.not_a_triton_name(offs)")
    with pytest.raises(tessera.CompilationError, match="not_a_triton_name") as info:
        kernel[(1,)](np.zeros(8, np.float32), BLOCK=8)
    assert "tl.not_a_triton_name" in info.value.source_line
