"""A kernel compiled for the GPU forgets its compiled code when a @jit helper it calls is
redefined (a notebook cell run again), and keeps it when nothing it depends on changed."""
import importlib.util
import textwrap

import importlib

jit = importlib.import_module("tessera.jit")  # the module (tessera.jit is the decorator)

SOURCE = """
import tessera
import tessera.language as tl

@tessera.jit
def helper(x):
    return x + {addend}

@tessera.jit
def kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, helper(tl.load(x_ptr + offs)))
"""


def load(path, addend):
    path.write_text(textwrap.dedent(SOURCE.format(addend=addend)))
    spec = importlib.util.spec_from_file_location(f"redefined_{addend}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_redefined_helper_drops_compiled_kernels(tmp_path):
    module = load(tmp_path / "a.py", 1)
    kernel = module.kernel
    before = kernel.source_key()
    kernel._kernels["some specialization"] = object()   # stands for a loaded cubin
    # An unrelated new @jit function: sources unchanged, the compiled kernel stays.
    load(tmp_path / "b.py", 1)
    assert kernel._generation != jit._jit_generation
    kernel._check_redefinitions()
    assert kernel._kernels and kernel.source_key() == before
    # The helper redefined in the kernel's own namespace (as a notebook cell does).
    module.helper = load(tmp_path / "c.py", 2).helper
    kernel._check_redefinitions()
    assert not kernel._kernels
    assert kernel.source_key() != before and "x + 2" in kernel.source_key()
