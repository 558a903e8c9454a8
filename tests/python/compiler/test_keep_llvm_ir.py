"""A launch's compile leaves the optimized LLVM IR unprinted (keep_llvm_ir=False: it keeps only
the cubin), and that changes nothing else: the same PTX as a compile that prints it, which
``asm["llir"]`` still shows."""
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


def _compile(keep_llvm_ir):
    return compiler.compile_kernel(scale_rows.fn, {"x_ptr": "*fp32", "y_ptr": "*fp32",
                                                    "n_cols": "i32"}, {"BLOCK": 128},
                                   keep_llvm_ir=keep_llvm_ir)


def test_the_same_ptx_without_the_llvm_ir():
    kept, left_out = _compile(True), _compile(False)
    assert "define" in kept.asm["llir"]
    assert "llir" not in left_out.asm
    with pytest.raises(KeyError, match="llir"):
        left_out.asm["llir"]
    assert left_out.asm["ptx"] == kept.asm["ptx"]
    assert left_out.metadata == kept.metadata


def test_the_launch_path_stores_that_ptx(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(tmp_path))
    x = np.zeros((4, 100), np.float32)
    compiled = scale_rows.warmup(x, x, 100, BLOCK=128, grid=(4,))
    assert "define" in compiled.asm["llir"]  # warmup() returns every stage
    seen = {}
    real = compiler.compile_kernel

    def spy(*args, **kwargs):
        seen["keep_llvm_ir"] = kwargs.get("keep_llvm_ir", True)
        return real(*args, **kwargs)

    import tessera.compiler as package
    monkeypatch.setattr(package, "compile_kernel", spy)
    spec = scale_rows._specialization(scale_rows._arguments((x, x, 100), {"BLOCK": 128})[2])
    options = compiler.CompileOptions()
    monkeypatch.setenv("TESSERA_ALWAYS_COMPILE", "1")
    metadata, image = launcher.build(scale_rows, spec, {"BLOCK": 128}, options)
    assert seen == {"keep_llvm_ir": False}
    assert metadata["name"] == compiled.metadata["name"]
