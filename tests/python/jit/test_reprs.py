# What a notebook user sees when they look at objects: a kernel's repr and help(), the knobs,
# dir(tl), and the error for a stage name asm() does not have.
import inspect
import pydoc

import pytest
import tessera
import tessera.language as tl
from tessera.compiler.compiler import KernelAsm, MissingStage
from tessera.config import knobs


@tessera.jit
def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr = 128):
    """Writes 2 * x into out.

    Example: ``scale[(triton.cdiv(n, 128),)](x, out, n)``."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def test_a_kernel_repr_shows_its_name_and_signature():
    assert repr(scale) == (f"<tessera kernel {__name__}.scale(x_ptr, out_ptr, n, "
                           f"BLOCK: tl.constexpr)>")


def test_help_shows_the_kernel_signature_and_docstring():
    assert str(inspect.signature(scale)) == str(inspect.signature(scale.fn))
    text = pydoc.render_doc(scale, renderer=pydoc.plaintext)
    assert "scale(x_ptr, out_ptr, n, BLOCK:" in text and "Writes 2 * x into out." in text
    assert "KernelDispatcher" not in text and "interpret" not in text


def test_a_kernel_on_a_class_stays_the_kernel():
    class Holder:
        kernel = scale
    assert Holder().kernel is scale and Holder.kernel is scale


def test_dir_of_tl_lists_the_language():
    names = dir(tl)
    assert names == sorted(set(tl.__all__))
    assert "arange" in names and "constexpr" in names
    assert not {"core", "math_semantic", "reduction_semantic"} & set(names)


def test_a_bad_stage_name_lists_the_stages():
    asm = KernelAsm(tir="t", tgir="g", llir="l", ptx="p")
    assert asm["ttgir"] == "g" and asm["ttir"] == "t"
    with pytest.raises(KeyError) as caught:
        asm["sass"]
    assert isinstance(caught.value, MissingStage)
    assert str(caught.value) == ("no stage 'sass': the stages are 'tir', 'tgir', 'llir', 'ptx'; "
                                 "Triton's names 'ttir' (= 'tir'), 'ttgir' (= 'tgir') also work")


def test_knobs_repr_shows_values_and_origins(monkeypatch):
    monkeypatch.setenv("TESSERA_DUMP", "all")
    with knobs.scope(debug=True):
        text = repr(knobs)
    assert "  debug=True,  # set in Python" in text
    assert "  dump='all',  # from $TESSERA_DUMP" in text
    assert "  wgmma_overlap=" in text and text.startswith("tessera knobs(")
