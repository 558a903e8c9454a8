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
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .. import frontend
from .._tessera import codegen as _codegen
from .._tessera import passes as _passes
from ..config import knobs
from . import cuda_paths, ptxas, target_limits
from .ast_source import ASTSource  # noqa: F401  (Triton's triton.compiler.compiler.ASTSource)

# The passes of each stage, as registered in C++ (cpp/transforms/pass_pipelines.cpp: the one
# place the order lives; `tessera-opt --pass-pipeline=tgir` runs the same list). Read-only
# here: a copy for display and for tests that run a stage's passes themselves.
PIPELINES: Dict[str, List[str]] = {name: list(passes)
                                   for name, _, passes, _ in _passes.pipelines()}

# The alignment a kernel with global scratch asks the allocator for (its device tensor maps
# sit at multiples of 128 bytes in each program's part, codegen/lower_tensormap.cpp).
GLOBAL_SCRATCH_ALIGN = 128


@dataclass(frozen=True)
class CompileOptions:
    """Options that change the generated code (all of them are part of the cache key)."""
    num_warps: int = 4
    num_stages: int = 1
    arch: str = "sm_90a"
    opt_level: int = 3
    # wgmma for the dots that fit (sm_90a only); the knob's value when the options are made.
    wgmma: bool = field(default_factory=lambda: bool(knobs.wgmma))
    # wgmma waits at the first use of a dot's result, not right after it (knobs.wgmma_overlap).
    wgmma_overlap: bool = field(default_factory=lambda: bool(knobs.wgmma_overlap))
    # A pipelined loop's wgmma group stays in flight across its back edge
    # (knobs.wgmma_pipeline; docs/perf/wgmma_across_iterations.md).
    wgmma_pipeline: bool = field(default_factory=lambda: bool(knobs.wgmma_pipeline))
    # Each copy's address carried across loop iterations: the backend without loop strength
    # reduction (knobs.carried_addresses; codegen/nvptx_target.h, emitPTX).
    carried_addresses: bool = field(default_factory=lambda: bool(knobs.carried_addresses))
    # Triton's launch options that change the code: a register cap per thread (PTX .maxnreg),
    # contracting a*b+c into fma (off: no fusion in LLVM nor in ptxas, --fmad=false), and
    # debug (tl.device_assert and `assert` in kernels are compiled in only when it is on; the
    # default is the knob, TESSERA_DEBUG; a kernel's @jit(debug=True) also turns it on).
    maxnreg: Optional[int] = None
    enable_fp_fusion: bool = True
    debug: bool = field(default_factory=lambda: bool(knobs.debug))
    # The opt-in Hopper path (knobs.tma): TMA copies of descriptor tiles, on sm_90a only.
    tma: bool = field(default_factory=lambda: bool(knobs.tma))
    # With tma: host-descriptor stores copied out by the TMA (knobs.tma_store, opt-in).
    tma_store: bool = field(default_factory=lambda: bool(knobs.tma_store))
    # With tma: descriptor reductions applied by the TMA (knobs.tma_reduce, on by default).
    tma_reduce: bool = field(default_factory=lambda: bool(knobs.tma_reduce))
    # sm_90a, 8 warps: the warpgroups take turns at their wgmma (knobs.pingpong, opt-in).
    pingpong: bool = field(default_factory=lambda: bool(knobs.pingpong))
    # With wgmma_pipeline: rescaled products carried across back edges (on by default).
    wgmma_carry_rescaled: bool = field(default_factory=lambda: bool(knobs.wgmma_carry_rescaled))
    # With wgmma_pipeline: an op's own barrier keeps the products nothing after it overwrites.
    wgmma_inner_keep: bool = field(default_factory=lambda: bool(knobs.wgmma_inner_keep))
    # With tma: every eligible TMA loop gets a producer warpgroup (knobs.warp_specialize;
    # docs/perf/warp_specialization.md).
    warp_specialize: bool = field(default_factory=lambda: bool(knobs.warp_specialize))

    def key(self) -> str:
        return repr(dataclasses.astuple(self))


class MissingStage(KeyError):
    """A stage that was not made, with the reason (KeyError prints its message quoted)."""

    def __str__(self) -> str:
        return str(self.args[0])


class KernelAsm(dict):
    """``CompiledKernel.asm``: stage name -> text (or bytes). Triton's names of the first two
    stages ("ttir", "ttgir") read Tessera's ("tir", "tgir"). Without ptxas there is no "cubin"
    (the driver assembles the PTX when the kernel is loaded on a GPU); asking for one says
    what is missing and how to get it."""

    _ALIASES = {"ttir": "tir", "ttgir": "tgir"}

    def __missing__(self, key):
        alias = self._ALIASES.get(key)
        if alias is not None and alias in self:
            return self[alias]
        if key == "cubin":
            raise MissingStage(f"no 'cubin' stage: {cuda_paths.ptxas_missing_message()}; on a "
                               "GPU the driver assembles the 'ptx' stage when the kernel loads")
        aliases = ", ".join(f"{a!r} (= {t!r})" for a, t in self._ALIASES.items() if t in self)
        raise MissingStage(f"no stage {key!r}: the stages are {', '.join(map(repr, self))}"
                           + (f"; Triton's names {aliases} also work" if aliases else ""))


class KernelMetadata(dict):
    """The metadata dict, also readable as attributes as Triton's (``metadata.num_warps``,
    ``metadata.shared``: the dynamic plus static shared memory in bytes)."""

    def __getattr__(self, name: str) -> Any:
        if name == "shared":
            return self.get("shared_bytes", 0) + self.get("static_shared_bytes", 0)
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"kernel metadata has no field '{name}'") from None


@dataclass
class CompiledKernel:
    """One specialization of a kernel compiled for one arch: its stages and its metadata.

    As Triton's CompiledKernel: ``name``, ``asm`` (also "ttir"/"ttgir"), ``metadata``,
    ``n_regs`` and ``n_spills`` (from ptxas; ``n_spills`` is the local memory per thread in
    4-byte words, as Triton reads it from the driver)."""
    name: str
    asm: Dict[str, Any]                 # "tir", "tgir", "llir", "ptx" (text), "cubin" (bytes)
    metadata: Dict[str, Any] = field(default_factory=dict)
    # Wall seconds per stage of this compile ("front end", "tir passes", ..., codegen's own
    # steps as "llvm: <step>", "ptxas"): where compile time goes (docs/perf/compile_time.md).
    # Not metadata: it is not stored in the cache and differs from run to run.
    stage_seconds: Dict[str, float] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        self.asm = KernelAsm(self.asm)
        self.metadata = KernelMetadata(self.metadata)

    @property
    def n_regs(self) -> int:
        return int(self.metadata.get("registers", 0))

    @property
    def n_spills(self) -> int:
        return int(self.metadata.get("stack_bytes", 0)) // 4


class _StageClock:
    """Wall seconds per compile stage, in order (CompiledKernel.stage_seconds)."""

    def __init__(self) -> None:
        self.seconds: Dict[str, float] = {}
        self._last = time.perf_counter()

    def step(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = now - self._last
        self._last = now

    def split(self, name: str, steps) -> None:
        """Replaces ``name`` by its parts (codegen's own step times), the rest as "other"."""
        total = self.seconds.pop(name)
        for step, seconds in steps:
            self.seconds[f"{name}: {step}"] = seconds
        self.seconds[f"{name}: other"] = max(0.0, total - sum(s for _, s in steps))


def _dump_names() -> List[str]:
    text = knobs.dump
    return [n.strip() for n in text.split(",") if n.strip()] if text else []


def _run_pipeline(module, stage: str, **options: Any) -> None:
    """Runs the registered pipeline of ``stage``; ``options`` are its pipeline options
    (module attributes its passes read: num_warps, num_stages, arch, wgmma, ...)."""
    dumps = _passes.run_pipeline(module, stage, options, _dump_names())
    if dumps:
        sys.stderr.write(dumps)


def build_tile_ir(fn, signature: Dict[str, str], constexprs: Dict[str, Any],
                  divisibility_16=(), equal_to_1=(), num_warps: int = 4,
                  debug: Optional[bool] = None, tma: bool = False, interpreter: bool = False,
                  large_tensors=(), tma_store: bool = False, tma_reduce: bool = False):
    """Front end + target-neutral cleanup: the layout-free tile IR (what the interpreter runs).
    ``debug``: device asserts build code (None: as knobs.debug); ``tma``: descriptor loads
    carry tensor maps (frontend.build_module), and with ``tma_store`` host-descriptor stores
    too (TESSERA_TMA_STORE), with ``tma_reduce`` descriptor reductions (TESSERA_TMA_REDUCE);
    ``interpreter``: built for the interpreter (its
    limits, e.g. dots of any size, as Triton's interpreter); ``large_tensors``: the pointer
    parameters whose tensors address 2**31 elements or more (their offsets become int64).
    The interpreter, and the GPU with ``debug``, check the int32 arithmetic of pointer offsets
    for overflow (the check_offsets pass)."""
    from ..language.extra.cuda.utils import compiling_with_warps  # tl.extra.cuda.num_warps
    with compiling_with_warps(num_warps):
        module = frontend.build_module(fn, signature, constexprs, set(divisibility_16),
                                       set(equal_to_1), debug=debug, tma=tma,
                                       tma_store=tma and tma_store,
                                       tma_reduce=tma and tma_reduce, interpreter=interpreter,
                                       large_tensors=set(large_tensors))
    # Only given when on: the module attribute it sets is part of the IR's text.
    checked = {"check_offsets": 1} if interpreter or (knobs.debug if debug is None else debug) \
        else {}
    _run_pipeline(module, "tir", num_warps=num_warps, **checked)
    return module


def libdevice_path() -> str:
    """libdevice.10.bc for the math ops that need it (codegen links it only then):
    TESSERA_LIBDEVICE, else a CUDA toolkit's or NVIDIA wheel's (compiler/cuda_paths.py);
    "" when none exists, and codegen reports a missing libdevice if a kernel needs it."""
    if knobs.libdevice:
        return knobs.libdevice
    for bin_dir in ptxas._toolkit_directories():  # each root's bin/; nvvm/ is its sibling
        candidate = os.path.join(os.path.dirname(bin_dir), cuda_paths.LIBDEVICE)
        if os.path.isfile(candidate):
            return candidate
    return ""


def _codegen_and_assemble(module, options: CompileOptions, kernel_name: str, keep_ir: bool,
                          clock: _StageClock, suffix: str = ""):
    """(codegen's result, ptxas's result or None when no ptxas is found) of the lowered module,
    each timed on `clock` (stages "codegen..." and "ptxas", + `suffix`); codegen reads the
    module without changing it, so it can run twice."""
    # None found: codegen names the default place in its error, if the kernel needs libdevice.
    libdevice = libdevice_path() or os.path.join(cuda_paths.DEFAULT_TOOLKIT, cuda_paths.LIBDEVICE)
    generated = _codegen.generate(module, arch=options.arch, num_warps=options.num_warps,
                                  opt_level=options.opt_level, libdevice_path=libdevice,
                                  enable_fp_fusion=options.enable_fp_fusion,
                                  maxnreg=options.maxnreg or 0, keep_unoptimized_ir=False,
                                  keep_llvm_ir=keep_ir)
    clock.step("codegen" + suffix)
    clock.split("codegen" + suffix, generated["step_seconds"])
    assembled = ptxas.assemble(generated["ptx"], options.arch,
                               options=() if options.enable_fp_fusion else ("--fmad=false",),
                               kernel=kernel_name)
    clock.step("ptxas" + suffix)
    return generated, assembled


def _spill_bytes(assembled) -> int:
    return assembled.report["spill_stores"] + assembled.report["spill_loads"]


def _wgmma_serialized(assembled) -> bool:
    """Whether ptxas serialized the kernel's wgmma instructions for a wgmma dependency
    barrier it had to place in a divergent path (C7518): each then waits for the one before."""
    return assembled is not None and "(C7518)" in assembled.log


def compile_kernel(fn, signature: Dict[str, str], constexprs: Dict[str, Any],
                   divisibility_16=(), equal_to_1=(),
                   options: CompileOptions = CompileOptions(), tile_ir=None,
                   large_tensors=(), keep_ir: bool = True) -> CompiledKernel:
    """Compiles one specialization through every stage down to a cubin (when ptxas is found).

    ``tile_ir``: the module :func:`build_tile_ir` made for these same arguments, used (and
    consumed) instead of running the front end again (the autotuner reads it first);
    ``large_tensors``: pointer parameters whose tensors address 2**31 elements or more;
    ``keep_ir``: print the IR of the stages into ``asm`` ("tir", "tgir", "llir"; "ptx" and
    "cubin" are always there). A launch keeps only the cubin: it leaves them out, 3-5% of a
    compile (docs/perf/compile_time.md)."""
    kernel_name = getattr(fn, "__name__", "kernel")
    target_limits.check_arch(kernel_name, options.arch)
    clock = _StageClock()
    tma = options.tma and options.arch == "sm_90a"
    if tile_ir is not None:
        module = tile_ir
    else:
        from ..language.target_info import compiling_for  # tl.target_info sees this arch
        with compiling_for(options.arch):
            module = build_tile_ir(fn, signature, constexprs, divisibility_16, equal_to_1,
                                   options.num_warps, options.debug, tma=tma,
                                   large_tensors=large_tensors, tma_store=options.tma_store,
                                   tma_reduce=options.tma_reduce)
    asm: Dict[str, Any] = KernelAsm(tir=module.str()) if keep_ir else KernelAsm()
    clock.step("front end + tir passes")
    if tma:  # the pipeliner's TMA variant (transforms/pipeline/tma.h); absent: unchanged IR
        module.set_attr("tma", 1)
        if options.warp_specialize:  # transforms/pipeline/warp_specialize.h
            module.set_attr("warp_specialize", 1)
    if options.debug:  # debug builds: mbarrier waits bounded, failing an assert (tma.h)
        module.set_attr("debug", 1)
    # Codegen's backend without loop strength reduction, on sm_90a only: measured there
    # (docs/perf/triton_parity.md), while on sm_80 the longer live ranges of the carried
    # pointers spill in mma.sync kernels (attention dK/dV D = 64: 28 bytes).
    carried = options.carried_addresses and options.arch == "sm_90a"
    if carried:
        module.set_attr("carried_addresses", 1)
    if options.pingpong and options.arch == "sm_90a":  # transforms/warpgroup_pingpong.cpp
        module.set_attr("pingpong", 1)
    # Not under a register cap (maxnreg, asked for occupancy): a product carried across the
    # back edge keeps its registers live there, and the masked attention forward at D = 64
    # capped at 128 spilled 4 bytes with it (analysis/shared_access.h).
    if options.wgmma_carry_rescaled and options.arch == "sm_90a" and not options.maxnreg:
        module.set_attr("wgmma_carry_rescaled", 1)
    if options.wgmma_inner_keep and options.arch == "sm_90a":  # analysis/membar.h
        module.set_attr("wgmma_inner_keep", 1)
    # num_stages: the pipeliner's default depth; wgmma only where the arch has it (sm_90a).
    _run_pipeline(module, "tgir", num_stages=options.num_stages, arch=options.arch,
                  wgmma=options.wgmma, wgmma_overlap=options.wgmma_overlap,
                  wgmma_pipeline=options.wgmma_pipeline)
    if keep_ir:
        asm["tgir"] = module.str()
    clock.step("tgir passes")
    generated, assembled = _codegen_and_assemble(module, options, kernel_name, keep_ir, clock)
    if carried and assembled is not None and _spill_bytes(assembled) > 0:
        # The carried pointers (one 64-bit register pair per copy register) can push a
        # register-heavy kernel into spills where LLVM's strength-reduced form (one base plus
        # 32-bit offsets) fits: then the kernel is generated the other way too and the one
        # that spills less kept (a tie: the strength-reduced one, the measured default
        # before). Only kernels that spill pay the second codegen.
        module.set_attr("carried_addresses", 0)
        plain = _codegen_and_assemble(module, options, kernel_name, keep_ir, clock,
                                      " (strength-reduced)")
        if _spill_bytes(plain[1]) <= _spill_bytes(assembled):
            generated, assembled, carried = plain[0], plain[1], False
            if keep_ir:
                asm["tgir"] = module.str()
        else:
            module.set_attr("carried_addresses", 1)
    if tma and _wgmma_serialized(assembled):
        # The issuing thread's wait for a slot's release is a path the other threads skip;
        # where ptxas then serializes every wgmma (measured: the attention dK/dV kernel with
        # ATOMIC_DQ on the TMA path), every thread waits instead (codegen/lower_tma.cpp).
        # Only kernels ptxas serialized pay the second codegen.
        module.set_attr("tma_convergent_waits", 1)
        retry = _codegen_and_assemble(module, options, kernel_name, keep_ir, clock,
                                      " (convergent waits)")
        if not _wgmma_serialized(retry[1]) and _spill_bytes(retry[1]) <= _spill_bytes(assembled):
            generated, assembled = retry
            if keep_ir:
                asm["tgir"] = module.str()
        else:
            module.set_attr("tma_convergent_waits", 0)
    if keep_ir:
        asm["llir"] = generated["llvm_ir"]
    asm["ptx"] = generated["ptx"]
    metadata: Dict[str, Any] = {
        "name": generated["kernel_name"],
        "num_warps": generated["num_warps"],
        "shared_bytes": generated["shared_bytes"],
        "arch": options.arch,
        "signature": dict(signature),
        "carried_addresses": carried,
    }
    if generated["total_num_warps"] != generated["num_warps"]:
        # A producer warpgroup after the num_warps warps (warp specialization): the launch's
        # block has total_num_warps warps; num_warps keeps the launch option's meaning.
        metadata["total_num_warps"] = generated["total_num_warps"]
    tensormaps = [list(f.attrs.get("tensormaps", [])) for f in module.functions()]
    if any(tensormaps):  # the launch passes the descriptors' CUtensorMaps (TESSERA_TMA)
        metadata["tensormaps"] = tensormaps[0]
    scratch = [int(f.attrs.get("global_scratch", 0)) for f in module.functions()]
    if any(scratch):  # device tensor maps: the launch allocates this much per program
        metadata["global_scratch_size"] = scratch[0]
        metadata["global_scratch_align"] = GLOBAL_SCRATCH_ALIGN
    if assembled is not None:
        asm["cubin"] = assembled.cubin
        # ptxas reports static shared memory; "shared_bytes" stays the dynamic amount the
        # launcher must pass (the kernel's shared scratch and ring buffers).
        report = dict(assembled.report)
        metadata["static_shared_bytes"] = report.pop("shared_bytes", 0)
        metadata.update(report)
    # Too much shared memory is this target's limit, not a launch failure: say so now (the
    # driver would only refuse it at load, on a GPU of this arch).
    target_limits.check_shared_memory(kernel_name, options.arch, metadata["shared_bytes"] +
                                      metadata.get("static_shared_bytes", 0))
    return CompiledKernel(generated["kernel_name"], asm, metadata, clock.seconds)

