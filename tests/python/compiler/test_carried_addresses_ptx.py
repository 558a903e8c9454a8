"""Each pipelined copy's address carried across the loop's iterations (knobs.carried_addresses:
codegen's backend without LLVM's loop strength reduction, the pointers' increments past their
copies; docs/perf/triton_parity.md, matmul_autotune), without a GPU.

The tile IR carries a pointer tile per pipelined load (`a_ptrs += BLOCK_K * stride_ak`), and
the lowered and optimized LLVM IR keeps one 64-bit phi per register of it. Loop strength
reduction (in the NVPTX backend's IR passes) folds each tile's phis into one base plus
loop-invariant offsets, which ptxas recomputes (IMAD.WIDE) right before each copy. With the
knob on, every cp.async of the K loop reads a register the loop carries (redefined in the
loop from itself, and advanced in place after the copy: sink_increments), as Triton's PTX
does. The knob changes codegen only: the optimized LLVM IR has the same instructions either
way, in another order. ptxas assembles every tessera.ops.matmul config at sm_90a with it on
without spills, and its value is part of the compile cache key."""
import re

import numpy as np
import pytest
from tessera.compiler import ptxas
from tessera.compiler.compiler import CompileOptions
from tessera.config import knobs
from tessera.launch_options import parse_options
from tessera.ops import gemm
from tessera.testing import relative_error

from test_wgmma_pipeline_ptx import loops
from test_wgmma_ptx import CONFIG_IDS, CONFIGS, compile_config

ASSIGN = re.compile(r"(?:add|sub)\.s64\s+(%rd\d+),\s*([^;]+);|mov\.b64\s+(%rd\d+),\s*([^;]+);")
COPY_SOURCE = re.compile(r"cp\.async\.cg\.shared\.global\s+\[[^\]]*\],\s*\[(%rd\d+)")


def copy_addresses(body: str) -> tuple:
    """(the source registers of the loop body's cp.async copies, those of them the loop
    carries: redefined in the body, through 64-bit adds and moves, from the register itself)."""
    definitions: dict = {}
    for match in ASSIGN.finditer(body):
        target = match.group(1) or match.group(3)
        operands = match.group(2) or match.group(4)
        definitions.setdefault(target, []).extend(re.findall(r"%rd\d+", operands))

    def reaches(register: str, target: str, seen: set) -> bool:
        for operand in definitions.get(register, []):
            if operand == target:
                return True
            if operand not in seen:
                seen.add(operand)
                if reaches(operand, target, seen):
                    return True
        return False

    sources = COPY_SOURCE.findall(body)
    return sources, [source for source in sources if reaches(source, source, set())]


def instructions(llvm_ir: str) -> list:
    """The lines of `llvm_ir` sorted, with the numbers of unnamed values (which follow the
    order of the instructions) left out."""
    return sorted(re.sub(r"%\d+\b", "%_", line) for line in llvm_ir.splitlines())


def compile_matmul(config, carried: bool):
    with knobs.scope(carried_addresses=carried):
        return compile_config(gemm.matmul_kernel, config, arch="sm_90a")


@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
def test_copy_addresses_are_loop_carried(config):
    on, off = compile_matmul(config, True), compile_matmul(config, False)
    # Codegen alone changes: the tile IR differs by the module's attribute only, the optimized
    # LLVM IR by the order of its instructions (increments moved past the copies) only.
    assert "carried_addresses = 1" in on.asm["tgir"]
    assert "carried_addresses" not in off.asm["tgir"]
    assert instructions(on.asm["llir"]) == instructions(off.asm["llir"])
    (body_on, _), = loops(on.asm["ptx"])
    (body_off, _), = loops(off.asm["ptx"])
    sources, carried = copy_addresses(body_on)
    # Every copy of the step (A's and B's tiles, 16 bytes per thread each) from its own
    # carried register.
    assert len(sources) >= 2 and carried == sources and len(set(sources)) == len(sources)
    for source in sources:  # advanced in place (no fresh register moved back at the back edge)
        assert re.search(rf"add\.s64\s+{source},\s*{source},", body_on), source
    # Without the knob, strength reduction leaves some copies reading base + offset.
    sources_off, carried_off = copy_addresses(body_off)
    assert len(sources_off) == len(sources) and len(carried_off) < len(sources_off)
    if ptxas.find_ptxas() is not None:
        assert on.n_spills == 0, f"{CONFIG_IDS[CONFIGS.index(config)]}: {on.n_regs} registers"


def test_knob_is_part_of_the_cache_key():
    assert CompileOptions(carried_addresses=True).key() != CompileOptions(
        carried_addresses=False).key()
    assert parse_options("k", {}, None).carried_addresses  # on by default
    with knobs.scope(carried_addresses=False):
        launch = parse_options("k", {}, None)
        assert not launch.carried_addresses and not CompileOptions().carried_addresses
    assert not launch.compile_options("sm_90a").carried_addresses


def ragged_k_matmul(config, carried: bool):
    """The tessera.ops.matmul kernel at K = 1000 (A staged inside the loop, B in a ring)."""
    a, b = np.zeros((512, 1000), np.float16), np.zeros((1000, 512), np.float16)
    with knobs.scope(carried_addresses=carried):
        return gemm.matmul_kernel.compile(a, b, b, b, 512, 512, 1000, 1000, 1, 512, 1, 512, 1,
                                          HAS_BIAS=False, ACTIVATION="", arch="sm_90a",
                                          num_warps=config.num_warps,
                                          num_stages=config.num_stages, **config.kwargs)


def test_a_kernel_that_spills_carried_is_generated_reduced():
    # 128x128x64, 4 warps, K = 1000: carried, ptxas spilled 432 bytes (the staged A tile's
    # registers beside 64-bit pointers); the compile then generates it with strength
    # reduction too and keeps that one (no spills): the same code as with the knob off.
    if ptxas.find_ptxas() is None:
        pytest.skip("ptxas not found: the fallback reads its spill report")
    config = CONFIGS[CONFIG_IDS.index("128x128x64-w4-s3")]
    on, off = ragged_k_matmul(config, True), ragged_k_matmul(config, False)
    assert not on.metadata["carried_addresses"] and not off.metadata["carried_addresses"]
    assert on.metadata["spill_stores"] == 0 and on.metadata["spill_loads"] == 0
    assert on.asm["ptx"] == off.asm["ptx"]
    assert "ptxas (strength-reduced)" in on.stage_seconds
    # A kernel that fits either way keeps its carried addresses, compiled once.
    fits = compile_matmul(CONFIGS[0], True)
    assert fits.metadata["carried_addresses"] and fits.metadata["spill_stores"] == 0
    assert not any("strength-reduced" in stage for stage in fits.stage_seconds)


def test_interpreter_numerics_unaffected():
    # The knob is codegen's: the interpreter runs the same tile IR (ragged shapes, fresh data,
    # against float64).
    rng = np.random.default_rng()
    M, N, K = 77, 45, 50
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    out = np.full((M, N), np.nan, np.float16)
    with knobs.scope(interpret=True, carried_addresses=True):
        assert gemm.matmul(a, b, out=out) is out
    assert relative_error(out.astype(np.float64), expected) < 5e-3
