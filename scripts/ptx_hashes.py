"""Hashes the sm_90a PTX of every tessera.ops kernel configuration and of the tutorials' own
kernels, to prove that a compiler change leaves the generated code byte for byte as it was.

Compiles without a GPU and without ptxas (only the PTX is hashed); the cases are those of
scripts/check_ops_ptx.py (every config the library can launch on sm_90a, every dtype) plus
the kernels that only the tutorials define (vector add, dropout)::

    PYTHONPATH=$PWD/python python3 scripts/ptx_hashes.py > before.txt   # then change things
    PYTHONPATH=$PWD/python python3 scripts/ptx_hashes.py > after.txt
    diff before.txt after.txt && echo identical

One line per kernel: "<sha256 of the PTX> <label>"; ``--quick`` compiles fewer configs.
"""
import argparse
import hashlib
import os
import sys
import tempfile
import types

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import check_ops_ptx as cases  # noqa: E402  (the case generators)

# tutorial -> the text that starts its first cell after the kernel definitions
OWN_TUTORIALS = {"01-vector-add.py": "# %% [markdown]\n# ## Correctness",
                 "04-low-memory-dropout.py": "# %% [markdown]\n# ## Correctness"}


def load_tutorial(name: str) -> types.ModuleType:
    """The definitions of tutorials/<name> (its text up to the correctness cell)."""
    with open(os.path.join(ROOT, "tutorials", name)) as f:
        source = f.read()
    source = source[:source.index(OWN_TUTORIALS[name])]
    module_name = "tutorial_" + name[:2]
    path = os.path.join(tempfile.mkdtemp(prefix="tessera-ptx-hash-"), module_name + ".py")
    with open(path, "w") as f:
        f.write(source)
    module = types.ModuleType(module_name)
    module.__file__ = path
    sys.modules[module_name] = module
    exec(compile(source, path, "exec"), module.__dict__)
    return module


def tutorial_cases():
    add = load_tutorial("01-vector-add.py")
    for dtype in cases.DTYPES.values():
        x = np.zeros(1000, dtype)
        for block in (256, 1024):
            yield f"add_kernel {x.dtype} BLOCK={block}", add.add_kernel, (x, x, x, 1000), \
                dict(BLOCK=block)
    dropout = load_tutorial("04-low-memory-dropout.py")
    x = np.zeros(1000, np.float32)
    keep = np.zeros(1000, np.int8)
    yield "masked_dropout_kernel", dropout.masked_dropout_kernel, (x, keep, x, 1000, 0.5), \
        dict(BLOCK=1024)
    yield "seeded_dropout_kernel", dropout.seeded_dropout_kernel, (x, x, 1000, 0.5, 123), \
        dict(BLOCK=1024)


def all_cases(quick: bool):
    from tessera.ops import flash_attention, fused_softmax, gemm, norms
    yield from cases.softmax_cases(fused_softmax)
    yield from cases.matmul_cases(gemm, quick)
    yield from cases.norm_cases(norms)
    yield from cases.attention_cases(flash_attention, quick)
    yield from tutorial_cases()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer configs and dtypes")
    args = parser.parse_args()
    os.environ.setdefault("TESSERA_CACHE_DIR", tempfile.mkdtemp(prefix="tessera-ptx-cache-"))
    from tessera.compiler import compiler
    compiler.ptxas.assemble = lambda *a, **k: None  # PTX only: no need to assemble
    for label, kernel, kernel_args, meta in all_cases(args.quick):
        ptx = kernel.asm(*kernel_args, arch="sm_90a", **meta)["ptx"]
        print(hashlib.sha256(ptx.encode()).hexdigest(), label, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
