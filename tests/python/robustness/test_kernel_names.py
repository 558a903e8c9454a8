"""Kernels named with any Python identifier compile: PTX allows only [A-Za-z0-9_$] in names,
so other names are escaped (codegen/symbol_names.cpp) instead of aborting LLVM, and two names
never share a PTX symbol."""
import numpy as np
import pytest
import tessera
import tessera.language as tl
from tessera.compiler import ptxas


def make(name):
    source = (f"def {name}(x_ptr, n, BLOCK: tl.constexpr):\n"
              "    offs = tl.arange(0, BLOCK)\n"
              "    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1,\n"
              "             mask=offs < n)\n")
    namespace = {"tl": tl}
    exec(compile(source, f"<kernel {name}>", "exec"), namespace)
    fn = namespace[name]
    import linecache
    linecache.cache[f"<kernel {name}>"] = (len(source), None, source.splitlines(True),
                                           f"<kernel {name}>")
    return tessera.jit(fn)


@pytest.mark.parametrize("name", ["k_é", "ядро", "カーネル", "__tessera_uk"])
def test_unicode_kernel_names_compile_to_valid_ptx(name):
    kernel = make(name)
    asm = kernel.asm(np.zeros(16, np.float32), 16, BLOCK=16)
    entry = [line for line in asm["ptx"].splitlines() if ".entry" in line][0]
    symbol = entry.split(".entry")[1].strip().split("(")[0].strip()
    assert symbol.isascii() and all(c.isalnum() or c in "_$" for c in symbol), symbol
    if ptxas.find_ptxas():
        assert "cubin" in asm


def test_escaped_names_are_distinct():
    symbols = set()
    for name in ("k_é", "k_è", "k_e", "k__e9"):
        ptx = make(name).asm(np.zeros(16, np.float32), 16, BLOCK=16)["ptx"]
        symbols.add([line for line in ptx.splitlines() if ".entry" in line][0])
    assert len(symbols) == 4


def test_unicode_kernel_runs_in_the_interpreter(monkeypatch):
    monkeypatch.setenv("TESSERA_INTERPRET", "1")
    x = np.arange(10, dtype=np.float32)
    make("k_ü")[(1,)](x, 10, BLOCK=16)
    np.testing.assert_array_equal(x, np.arange(10, dtype=np.float32) + 1)
