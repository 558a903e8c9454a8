"""A launch's compile leaves the IR stages unprinted (keep_ir=False: it keeps only the cubin),
and that changes nothing else: the same PTX, cubin and metadata as a compile that prints them,
which ``asm["tir"]``, ``asm["tgir"]`` and ``asm["llir"]`` still show."""
import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.compiler import compiler
from tessera.runtime import launcher


@tessera.jit
def scale_rows(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    tl.store(y_ptr + row * n_cols + cols, x * tl.sum(x, axis=0), mask=cols < n_cols)


def _compile(keep_ir):
    return compiler.compile_kernel(scale_rows.fn, {"x_ptr": "*fp32", "y_ptr": "*fp32",
                                                    "n_cols": "i32"}, {"BLOCK": 128},
                                   keep_ir=keep_ir)


def test_the_same_code_without_the_ir_text():
    kept, left_out = _compile(True), _compile(False)
    assert "define" in kept.asm["llir"] and "#blocked" in kept.asm["tgir"]
    assert kept.asm["tir"]
    assert sorted(left_out.asm) == sorted(name for name in kept.asm
                                          if name not in ("tir", "tgir", "llir"))
    with pytest.raises(KeyError, match="llir"):
        left_out.asm["llir"]
    assert left_out.asm["ptx"] == kept.asm["ptx"]
    assert left_out.asm.get("cubin") == kept.asm.get("cubin")
    assert left_out.metadata == kept.metadata


def test_the_launch_path_stores_that_ptx(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(tmp_path))
    x = np.zeros((4, 100), np.float32)
    compiled = scale_rows.warmup(x, x, 100, BLOCK=128, grid=(4,))
    assert "define" in compiled.asm["llir"]  # warmup() returns every stage
    seen = {}
    real = compiler.compile_kernel

    def spy(*args, **kwargs):
        seen["keep_ir"] = kwargs.get("keep_ir", True)
        return real(*args, **kwargs)

    import tessera.compiler as package
    monkeypatch.setattr(package, "compile_kernel", spy)
    spec = scale_rows._specialization(scale_rows._arguments((x, x, 100), {"BLOCK": 128})[2])
    options = compiler.CompileOptions()
    monkeypatch.setenv("TESSERA_ALWAYS_COMPILE", "1")
    metadata, image = launcher.build(scale_rows, spec, {"BLOCK": 128}, options)
    assert seen == {"keep_ir": False}
    assert metadata["name"] == compiled.metadata["name"]
