"""The tessera.ops package itself: its names load lazily (importing tessera imports no torch),
an unknown name fails with the list of known ones, and every public function documents its
shapes, dtypes, return value and an example."""
import subprocess
import sys

import pytest
import tessera.ops


def test_import_tessera_does_not_import_torch_or_the_kernels():
    code = ("import sys, tessera, tessera.ops; from tessera.ops import softmax, rms_norm, matmul; "
            "print('torch' in sys.modules, 'tessera.ops.flash_attention' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False"]


def test_names_resolve_to_their_family_modules():
    from tessera.ops import fused_softmax, gemm, norms
    assert tessera.ops.softmax is fused_softmax.softmax
    assert tessera.ops.matmul is gemm.matmul
    assert tessera.ops.layer_norm_backward is norms.layer_norm_backward
    assert tessera.ops.attention_forward.__module__ == "tessera.ops.flash_attention.forward"
    assert sorted(tessera.ops.__all__) == sorted(
        ["attention", "attention_forward", "attention_backward", "rms_norm", "rms_norm_backward",
         "layer_norm", "layer_norm_backward", "softmax", "matmul", "attention_masked",
         "attention_masked_forward", "attention_masked_backward"])
    assert set(tessera.ops.__all__) <= set(dir(tessera.ops))


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(AttributeError, match="no attribute 'flash'.*attention_forward"):
        tessera.ops.flash  # noqa: B018


@pytest.mark.parametrize("name", tessera.ops.__all__)
def test_docstrings_say_shapes_dtypes_returns_and_show_an_example(name):
    doc = getattr(tessera.ops, name).__doc__
    for section in ("Args:", "Returns:", "Example::"):
        assert section in doc, f"{name}: no {section}"
    assert "float16" in doc or "float32" in doc, name
    assert f"{name}(" in doc.split("Example::")[1], f"{name}: the example does not call it"
