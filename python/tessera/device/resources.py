"""A model of what one thread block needs (threads, shared memory, registers) and whether it
fits on a GPU, used by the autotuner to drop configs that cannot run and by the report for a
kernel's occupancy (public path: ``tessera.autotuner.resources``).

Two moments:

* before compiling (:func:`estimate`, from the tile IR of the front end, which costs
  milliseconds): threads per block, a lower bound of the shared memory that pipelined dot
  operands take, a lower bound of the registers that loop-carried floating-point tiles hold.
  A config is dropped only when even these lower bounds do not fit, so the model never drops
  one that would have run;
* after compiling (:func:`from_metadata`): the exact shared bytes and registers that codegen
  and ptxas report; a block that cannot be resident on one multiprocessor fails the config.

    reason = why_not_fit(estimate(module, num_warps=8, num_stages=3), props)  # None: fits
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

MAX_REGISTERS_PER_THREAD = 255
REGISTER_GRANULE = 256            # registers are allocated per warp in units of 256
SHARED_RESERVED_PER_BLOCK = 1024  # the driver reserves 1 KiB of shared memory per block (sm_80+)

# (resident threads, resident blocks) per multiprocessor, by compute capability (CUDA
# programming guide, "Compute Capabilities"); DeviceProperties does not carry these.
_RESIDENT_LIMITS = {(7, 5): (1024, 16), (8, 0): (2048, 32), (8, 6): (1536, 16),
                    (8, 7): (2048, 16), (8, 9): (1536, 24), (9, 0): (2048, 32),
                    (10, 0): (2048, 32), (12, 0): (1536, 32)}


@dataclass(frozen=True)
class Resources:
    """What one block of a kernel needs; 0 registers means unknown (not compiled yet)."""
    threads: int
    shared_bytes: int = 0
    registers: int = 0


def resident_limits(props) -> Tuple[int, int]:
    """(threads, blocks) that can be resident on one multiprocessor of ``props``."""
    cc = tuple(props.compute_capability)
    if cc in _RESIDENT_LIMITS:
        return _RESIDENT_LIMITS[cc]
    known = [k for k in _RESIDENT_LIMITS if k <= cc]
    return _RESIDENT_LIMITS[max(known)] if known else (1024, 16)


def register_budget(threads: int, props) -> int:
    """The most registers a thread of a ``threads``-thread block can have (ptxas keeps it
    under this because codegen tells it the block size)."""
    per_thread = props.max_registers_per_multiprocessor // max(threads, 1)
    return max(0, min(MAX_REGISTERS_PER_THREAD, per_thread - per_thread % 8))


def _registers_per_warp(registers: int) -> int:
    return -(-registers * 32 // REGISTER_GRANULE) * REGISTER_GRANULE


def occupancy(resources: Resources, props) -> Tuple[int, str]:
    """(blocks resident per multiprocessor, what limits it); 0 blocks: the kernel cannot run."""
    max_threads, max_blocks = resident_limits(props)
    limits = {"blocks per multiprocessor": max_blocks,
              "threads": max_threads // max(resources.threads, 1)}
    if resources.registers:
        warps = -(-resources.threads // props.warp_size)
        per_block = warps * _registers_per_warp(resources.registers)
        limits["registers"] = props.max_registers_per_multiprocessor // per_block
    if resources.shared_bytes:
        per_block = resources.shared_bytes + SHARED_RESERVED_PER_BLOCK
        limits["shared memory"] = props.max_shared_memory_per_multiprocessor // per_block
    limiter = min(limits, key=lambda name: limits[name])
    return limits[limiter], limiter


def why_not_fit(resources: Resources, props) -> Optional[str]:
    """None when one block fits on a multiprocessor of ``props``, else the reason."""
    if resources.threads > props.max_threads_per_block:
        return (f"needs {resources.threads} threads per block; the device allows "
                f"{props.max_threads_per_block}")
    if resources.shared_bytes > props.max_shared_memory_per_block_optin:
        return (f"out of shared memory: needs {resources.shared_bytes} bytes per block; the "
                f"device allows {props.max_shared_memory_per_block_optin}")
    if resources.registers:
        warps = -(-resources.threads // props.warp_size)
        needed = warps * _registers_per_warp(resources.registers)
        if needed > props.max_registers_per_multiprocessor:
            return (f"too many registers: {resources.registers} per thread x "
                    f"{resources.threads} threads needs {needed}; a multiprocessor has "
                    f"{props.max_registers_per_multiprocessor}")
    blocks, limiter = occupancy(resources, props)
    if blocks == 0:
        return f"no block fits on a multiprocessor (limited by {limiter})"
    return None


def from_metadata(metadata: Dict[str, Any]) -> Resources:
    """The exact needs of a compiled kernel: codegen's shared bytes, ptxas's registers."""
    shared = max(int(metadata.get("shared_bytes", 0) or 0), 0)
    warps = metadata.get("total_num_warps", metadata["num_warps"])  # with a producer warpgroup
    return Resources(threads=32 * int(warps), shared_bytes=shared,
                     registers=int(metadata.get("registers", 0) or 0))


# ---------------------------------------------------------------------------- before compiling

def _tensor_bits(ty) -> int:
    """Bits of a tensor of type ``ty`` (0 for a scalar); pointers are 64-bit."""
    if not ty.is_tensor():
        return 0
    element = ty.element_type
    bits = 64 if element.kind == "pointer" else element.bit_width
    for extent in ty.shape:
        bits *= extent
    return bits


def _words_per_thread(ty, threads: int) -> int:
    """32-bit registers that a tensor of type ``ty`` takes per thread, at least."""
    return -(-_tensor_bits(ty) // (32 * threads))


def _tensor_bytes(ty) -> int:
    return _tensor_bits(ty) // 8


def _held_words(ty, threads: int) -> int:
    """32-bit registers per thread that a loop-carried value of type ``ty`` must hold, at
    least: floating-point tiles (accumulators, running maxima) only. Pointer and integer tiles
    carried by a loop are mostly a base plus `tl.arange` offsets advanced by a scalar, which
    codegen keeps as one base register and immediate offsets, not a 64-bit register per
    element: counted, the 8192^3 matmul's 256x128x64 tile "needed" 320 registers per thread
    and was dropped, though it compiles to 168 with no spill and is the fastest config."""
    if not ty.is_tensor() or not ty.element_type.is_float():
        return 0
    return _words_per_thread(ty, threads)


def _walk(block, threads: int, num_stages: int, carried: int, in_loop: bool,
          totals: Dict[str, int]) -> None:
    """Fills totals["carried"] (most loop-carried words live at once, nested loops adding up)
    and totals["shared"] (largest pipelined dot operand ring)."""
    for op in block.operations:
        inner_carried, inner_loop = carried, in_loop
        if op.name in ("for", "while"):
            inner_carried = carried + sum(_held_words(r.type, threads) for r in op.results)
            inner_loop = True
            totals["carried"] = max(totals["carried"], inner_carried)
        elif op.name == "dot" and in_loop and num_stages > 1:
            # The pipeliner keeps num_stages-1 tiles of each operand in flight in shared memory.
            operands = sum(_tensor_bytes(v.type) for v in list(op.operands)[:2])
            totals["shared"] = max(totals["shared"], (num_stages - 1) * operands)
        for index in range(op.num_regions):
            _walk(op.body(index), threads, num_stages, inner_carried, inner_loop, totals)


def estimate(module, num_warps: int, num_stages: int) -> Tuple[Resources, int]:
    """(lower-bound resources, loop-carried registers per thread) of a tile-IR module."""
    threads = 32 * num_warps
    totals = {"carried": 0, "shared": 0}
    for func in module.functions():
        _walk(func.body(0), threads, num_stages, 0, False, totals)
    return Resources(threads=threads, shared_bytes=totals["shared"]), totals["carried"]


def why_not_fit_before_compile(module, num_warps: int, num_stages: int, props) -> Optional[str]:
    """None when the config may fit, else why it cannot (checked on the tile IR)."""
    resources, carried = estimate(module, num_warps, num_stages)
    reason = why_not_fit(resources, props)
    if reason is not None:
        return reason
    budget = register_budget(resources.threads, props)
    if carried > budget:
        return (f"too many registers: loop-carried tiles need at least {carried} registers per "
                f"thread, a thread of a {resources.threads}-thread block has {budget} (it would "
                f"spill in every iteration)")
    return None
