"""What each target accepts, checked at compile time so the error names the kernel and the
setting rather than surfacing from LLVM or the driver at launch: the archs Tessera compiles
for, and each arch's shared memory per block (the opt-in maximum a kernel can ask for)."""
from __future__ import annotations

import re
from typing import Optional

from ..errors import OutOfResources

# Tessera's codegen targets sm_80 and newer ("a"/"f": the arch-specific feature sets).
_ARCH = re.compile(r"^sm_(\d+)(a|f)?$")
EXAMPLE_ARCHS = "sm_80, sm_86, sm_89, sm_90, sm_90a, sm_100a, sm_120"

# Shared memory per block, opt-in maximum (CUDA's sharedMemPerBlockOptin), in bytes, by
# compute capability. Archs not listed are not checked here (the driver still is at load).
SHARED_MEMORY_LIMIT = {
    80: 166912,   # A100: 163 KiB
    86: 101376,   # RTX 30xx, A10, A40: 99 KiB
    87: 166912,   # Jetson Orin: 163 KiB
    89: 101376,   # RTX 40xx, L4, L40: 99 KiB
    90: 232448,   # H100, H200: 227 KiB
    100: 232448,  # B200: 227 KiB
    120: 101376,  # RTX 50xx: 99 KiB
}


def check_arch(kernel: str, arch: str) -> int:
    """The compute capability of ``arch`` ("sm_90a" -> 90); ValueError naming the kernel and
    listing the targets when Tessera cannot compile for it.

    Example: ``check_arch("add", "sm_90a") == 90``; ``check_arch("add", "sm_70")`` raises.
    """
    match = _ARCH.match(arch) if isinstance(arch, str) else None
    if match is None or int(match.group(1)) < 80:
        raise ValueError(f"{kernel}: unsupported arch {arch!r}: Tessera compiles for sm_80 and "
                         f"newer ({EXAMPLE_ARCHS})")
    return int(match.group(1))


def shared_memory_limit(arch: str) -> Optional[int]:
    """Bytes of shared memory a block may use on ``arch``; None where not known here."""
    match = _ARCH.match(arch)
    return SHARED_MEMORY_LIMIT.get(int(match.group(1))) if match else None


def check_shared_memory(kernel: str, arch: str, required: int) -> None:
    """OutOfResources (as Triton's, which the autotuner treats as a config that does not fit)
    when ``required`` bytes of shared memory exceed what ``arch`` gives a block."""
    limit = shared_memory_limit(arch)
    if limit is not None and required > limit:
        raise OutOfResources(required, limit, f"shared memory (kernel '{kernel}' on {arch})")
