"""ptxas: PTX text -> cubin for one exact arch, with the resources each kernel uses.

The last compile stage. ptxas is looked for in ``knobs.ptxas`` (TESSERA_PTXAS), then PATH, then
the CUDA toolkits and NVIDIA's pip wheels (cuda_paths.py says where). When it is not installed,
:func:`assemble` returns None and the caller lets the driver's JIT linker make the cubin on the
GPU machine (``tessera.runtime.driver.jit_ptx_to_cubin``).

Example::

    result = assemble(ptx_text, "sm_90a")
    if result is not None:
        cubin = result.cubin
        assert result.report["spill_stores"] == 0, result.log
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Sequence

from ..errors import PTXASError

from ..config import knobs
from . import cuda_paths

_ARCH = re.compile(r"^sm_\d{2,3}[af]?$")
_REPORT_FIELDS = ("registers", "spill_stores", "spill_loads", "stack_bytes", "shared_bytes")

# The lines of `ptxas -v` that carry numbers, e.g.
#   ptxas info    : Compiling entry function 'add_kernel' for 'sm_80'
#   ptxas info    : Function properties for add_kernel
#       88 bytes stack frame, 84 bytes spill stores, 84 bytes spill loads
#   ptxas info    : Used 24 registers, used 1 barriers, 4096 bytes smem, 368 bytes cmem[0]
_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


class PtxasError(RuntimeError, PTXASError):
    """ptxas rejected the PTX; the message holds ptxas's own output (also
    ``triton.runtime.errors.PTXASError``)."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


@dataclass(frozen=True)
class PtxasResult:
    """A cubin and what ptxas reported about its kernels."""
    cubin: bytes
    arch: str
    log: str                             # ptxas's -v output
    kernels: Dict[str, Dict[str, int]]   # entry name -> {registers, spill_stores, ...}

    @property
    def report(self) -> Dict[str, int]:
        """The kernel's resources; with several kernels, the largest value of each field."""
        report = {field: 0 for field in _REPORT_FIELDS}
        for resources in self.kernels.values():
            for field in _REPORT_FIELDS:
                report[field] = max(report[field], resources[field])
        return report


def _toolkit_directories() -> Sequence[str]:
    """Where a CUDA toolkit's (or NVIDIA wheel's) ptxas lives when it is not on PATH."""
    return [os.path.join(root, "bin") for root in cuda_paths.cuda_roots()]


def find_ptxas() -> Optional[str]:
    """Path of the ptxas to use, or None when none is installed."""
    configured = knobs.ptxas
    if configured:
        if not (os.path.isfile(configured) and os.access(configured, os.X_OK)):
            raise PtxasError(f"TESSERA_PTXAS={configured!r} is not an executable file; "
                             "point it at ptxas or unset it to search for one")
        return configured
    found = shutil.which("ptxas")
    if found:
        return found
    for directory in _toolkit_directories():
        candidate = os.path.join(directory, "ptxas")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _version_key(path: str) -> Optional[str]:
    """The disk cache key of ``path``'s answer: its real path, size and modification time."""
    try:
        real = os.path.realpath(path)
        stat = os.stat(real)
    except OSError:
        return None
    return hashlib.sha256(f"ptxas --version\0{real}\0{stat.st_size}\0{stat.st_mtime_ns}"
                          .encode()).hexdigest()


# key -> the answer runtime/prewarm.py asked for ahead of the first compile; taken once, by
# the version() call that stores it in the disk cache.
_ASKED: Dict[str, str] = {}


@functools.lru_cache(maxsize=None)
def version(path: str) -> str:
    """The release ptxas reports, e.g. "13.0" (part of the compiler's cache key).

    Running ``ptxas --version`` costs tens of milliseconds, on every fresh process's first
    launch: the answer is kept in the disk cache (namespace "toolchain"), keyed by the
    executable's real path, size and modification time, the same evidence Python trusts to
    reuse a module's bytecode. A changed ptxas has a new key, so it is asked again.
    """
    from ..store.kernel_cache import KernelCache
    key = _version_key(path)
    if key is None:
        return _ask_version(path)
    cache = KernelCache(namespace="toolchain")
    stored = cache.get(key)
    if stored is not None and "version.txt" in stored:
        return stored["version.txt"].decode()
    answer = _ASKED.pop(key, None) or _ask_version(path)
    cache.put(key, {"version.txt": answer.encode()})
    return answer


def prefetch_version(path: str) -> None:
    """Asks ``path`` its release ahead of :func:`version` when the disk cache does not hold
    it (runtime/prewarm.py, off the caller's thread). Writes nothing: version() stores the
    answer, in the cache directory configured when it runs."""
    from ..store.kernel_cache import KernelCache
    key = _version_key(path)
    if key is None or key in _ASKED:
        return
    stored = KernelCache(namespace="toolchain").get(key)
    if stored is None or "version.txt" not in stored:
        _ASKED[key] = _ask_version(path)


def _ask_version(path: str) -> str:
    text = subprocess.run([path, "--version"], capture_output=True, text=True,
                          check=False).stdout
    match = re.search(r"release (\d+\.\d+)", text)
    return match.group(1) if match else text.strip()


def parse_report(text: str) -> Dict[str, Dict[str, int]]:
    """Resources per entry function from the output of ``ptxas -v``."""
    kernels: Dict[str, Dict[str, int]] = {}
    entry: Optional[str] = None       # the entry function being compiled
    properties: Optional[str] = None  # the function whose properties come next
    for line in text.splitlines():
        if match := _ENTRY.search(line):
            entry = match.group(1)
            kernels[entry] = {field: 0 for field in _REPORT_FIELDS}
        elif match := _PROPERTIES.search(line):
            properties = match.group(1)
        elif (match := _FRAME.search(line)) and properties in kernels:
            stack, stores, loads = (int(g) for g in match.groups())
            kernels[properties].update(stack_bytes=stack, spill_stores=stores, spill_loads=loads)
        elif (match := _USED.search(line)) and entry is not None:
            kernels[entry]["registers"] = int(match.group(1))
            if smem := _SMEM.search(line):
                kernels[entry]["shared_bytes"] = int(smem.group(1))
    return kernels


_ERROR_LINE = re.compile(r", line (\d+);")


def _failure_message(kernel: str, arch: str, status: int, log: str, ptx: str) -> str:
    """ptxas's own words, the kernel's name, and the PTX lines they point at."""
    text = f"ptxas failed for {arch} (exit status {status}):\n{log}"
    if kernel:
        text = f"{kernel}: {text}"
    lines = ptx.splitlines()
    cited = sorted({int(n) for n in _ERROR_LINE.findall(log)})
    for number in cited[:5]:
        if 1 <= number <= len(lines):
            text += f"\nPTX line {number}: {lines[number - 1].strip()}"
    return text


def assemble(ptx: str, arch: str, *, opt_level: int = 3,
             options: Sequence[str] = (), kernel: str = "") -> Optional[PtxasResult]:
    """Assembles ``ptx`` for exactly ``arch`` ("sm_80", "sm_90a", ...); None without ptxas.

    Raises :class:`PtxasError` when the PTX does not assemble: ptxas's output, ``kernel``
    (the kernel's name) and the PTX lines ptxas cites.
    """
    if not _ARCH.match(arch):
        raise ValueError(f"arch must look like 'sm_80' or 'sm_90a', got {arch!r}")
    ptxas = find_ptxas()
    if ptxas is None:
        return None
    with tempfile.TemporaryDirectory(prefix="tessera-ptxas-") as directory:
        # Named after the kernel: ptxas's messages cite the file (the folder is removed below).
        source = Path(directory) / f"{re.sub(r'[^A-Za-z0-9_$]', '_', kernel) or 'kernel'}.ptx"
        target = Path(directory) / "kernel.cubin"
        source.write_text(ptx)
        command = [ptxas, f"-arch={arch}", "-v", f"-O{opt_level}", *options,
                   "-o", str(target), str(source)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        log = (done.stdout + done.stderr).strip().replace(f"{directory}{os.sep}", "")
        if done.returncode != 0:
            raise PtxasError(_failure_message(kernel, arch, done.returncode, log, ptx), log)
        return PtxasResult(target.read_bytes(), arch, log, parse_report(log))
