"""The compiler driver: the whole compilation as one function of named stages.

    @jit function ──front end──► tir    (tile IR, no layouts; cleaned by canonicalize/cse/dce/licm)
                  ──layouts───► tgir   (every tensor carries a layout; accesses coalesced)
                  ──codegen───► llir   (LLVM IR after O3)
                  ──LLVM──────► ptx
                  ──ptxas─────► cubin  (or the driver JIT when ptxas is absent)

Each stage's text is kept in ``CompiledKernel.asm`` so that every stage can be inspected, and
``TESSERA_DUMP`` prints the IR after chosen passes.
"""
from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .. import frontend
from .._tessera import codegen as _codegen
from .._tessera import passes as _passes
from ..config import knobs
from . import ptxas

# The default pipeline, by stage. Pass names are the registered names (one name per pass file).
PIPELINES: Dict[str, List[str]] = {
    "tir": ["canonicalize", "cse", "dce", "licm", "canonicalize", "dce"],
    "tgir": ["assign_layouts", "coalesce", "remove_layout_conversions",
             "canonicalize", "cse", "dce"],
}


@dataclass(frozen=True)
class CompileOptions:
    """Options that change the generated code (all of them are part of the cache key)."""
    num_warps: int = 4
    num_stages: int = 1
    arch: str = "sm_90a"
    opt_level: int = 3

    def key(self) -> str:
        return repr(dataclasses.astuple(self))


@dataclass
class CompiledKernel:
    """One specialization of a kernel compiled for one arch: its stages and its metadata."""
    name: str
    asm: Dict[str, Any]                 # "tir", "tgir", "llir", "ptx" (text), "cubin" (bytes)
    metadata: Dict[str, Any] = field(default_factory=dict)


def _dump_names() -> List[str]:
    text = knobs.dump
    return [n.strip() for n in text.split(",") if n.strip()] if text else []


def _run_pipeline(module, stage: str) -> None:
    dumps = _passes.run(module, PIPELINES[stage], _dump_names())
    if dumps:
        sys.stderr.write(dumps)


def build_tile_ir(fn, signature: Dict[str, str], constexprs: Dict[str, Any],
                  divisibility_16=(), equal_to_1=(), num_warps: int = 4):
    """Front end + target-neutral cleanup: the layout-free tile IR (what the interpreter runs)."""
    module = frontend.build_module(fn, signature, constexprs, set(divisibility_16),
                                   set(equal_to_1))
    module.set_attr("num_warps", num_warps)
    _run_pipeline(module, "tir")
    return module


def compile_kernel(fn, signature: Dict[str, str], constexprs: Dict[str, Any],
                   divisibility_16=(), equal_to_1=(),
                   options: CompileOptions = CompileOptions()) -> CompiledKernel:
    """Compiles one specialization through every stage down to a cubin (when ptxas is found)."""
    module = build_tile_ir(fn, signature, constexprs, divisibility_16, equal_to_1,
                           options.num_warps)
    asm: Dict[str, Any] = {"tir": module.str()}
    _run_pipeline(module, "tgir")
    asm["tgir"] = module.str()
    generated = _codegen.generate(module, arch=options.arch, num_warps=options.num_warps,
                                  opt_level=options.opt_level)
    asm["llir"] = generated["llvm_ir"]
    asm["ptx"] = generated["ptx"]
    metadata: Dict[str, Any] = {
        "name": generated["kernel_name"],
        "num_warps": generated["num_warps"],
        "shared_bytes": generated["shared_bytes"],
        "arch": options.arch,
        "signature": dict(signature),
    }
    assembled = ptxas.assemble(asm["ptx"], options.arch)
    if assembled is not None:
        asm["cubin"] = assembled.cubin
        metadata.update(assembled.report)
    return CompiledKernel(generated["kernel_name"], asm, metadata)
