"""From a @jit call's specialization to a launchable kernel: the glue between the compiler,
the on-disk cache and the driver.

    prepare(): arch of the device → cache key → cached cubin, or compile + store → load the
    module on the device → a C++ KernelLauncher (argument packing and cuLaunchKernel in C++).

The result is kept by the JITFunction per specialization, so this runs once per
specialization and process; a second process finds the cubin on disk and does not compile.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
from pathlib import Path
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..config import knobs
from ..device import driver
from ..store.kernel_cache import KernelCache, cache_key
from . import allocation, descriptor_arguments, prewarm
from .sources_digest import python_sources_digest

def block_warps(metadata) -> int:
    """The warps of the launch's block: num_warps, plus a producer warpgroup when the kernel is
    warp-specialized (metadata ``total_num_warps``; docs/perf/warp_specialization.md)."""
    return int(metadata.get("total_num_warps", metadata["num_warps"]))

def _file_identity(path: str) -> str:
    """A file's real path, size and modification time (what Python trusts to reuse a module's
    bytecode); "absent" when there is none."""
    try:
        real = os.path.realpath(path)
        stat = os.stat(real)
    except (OSError, ValueError):
        return "absent"
    return f"{real}:{stat.st_size}:{stat.st_mtime_ns}"


@functools.lru_cache(maxsize=None)
def compiler_build_id() -> str:
    """Identifies everything besides a kernel's own source that makes its cubin: the core
    library and the binding, the Python compiler sources (:func:`python_sources_digest`),
    the libdevice linked into math kernels and the ptxas release that makes the cubins
    (another ptxas must not reuse stale cubins)."""
    prewarm.wait()  # it may be computing the same parts
    from ..compiler import ptxas
    from ..compiler.compiler import libdevice_path
    digest = hashlib.sha256()
    assembler = ptxas.find_ptxas()
    digest.update(f"ptxas {ptxas.version(assembler) if assembler else 'driver-jit'}".encode())
    # The core sits beside the binding (elsewhere in editable installs).
    from .._tessera import __file__ as binding_file
    binding = Path(binding_file).resolve()
    for library in (binding.parent / "_lib" / "libtessera_core.so", binding):
        if library.exists():
            stat = library.stat()
            digest.update(f"{stat.st_size}:{stat.st_mtime_ns}".encode())
    digest.update(f"libdevice {_file_identity(libdevice_path())}".encode())
    # The digest runtime/prewarm.py made ahead, once (a later build id reads the files again).
    digest.update((prewarm.take("sources digest") or python_sources_digest()).encode())
    from .._version import __version__
    digest.update(__version__.encode())
    return digest.hexdigest()[:32]


def arch_of(device: int) -> str:
    """Exact target of a device: sm_90a on Hopper (wgmma, setmaxnreg), else sm_XY."""
    major, minor = driver.get_device_properties(device).compute_capability
    return f"sm_{major}{minor}" + ("a" if major == 9 else "")


def default_arch() -> str:
    """The arch of device 0 when a driver is present, else sm_90a (compile-only machines)."""
    ok, _ = driver.driver_available()
    return arch_of(0) if ok else "sm_90a"


def _launcher_kind(code: str) -> str:
    return "ptr" if code.startswith("*") else code


class Launchable:
    """A kernel loaded on one device: launch(grid, args) on the current stream of the
    framework the arguments came from (found once, when the kernel is prepared).

    Arguments are expected on the device the kernel was prepared for (as with Triton, which
    launches on the current device); a pointer from another device faults in the kernel.

    The C++ fast path (cpp/bindings/launch.cpp) launches ``launcher`` itself, on the stream
    that the DLPack exchange table of ``stream_type`` reports (torch.Tensor: torch's current
    stream, one C call), else on ``current_stream()``.
    """

    def __init__(self, name: str, launcher, device: int, framework: str,
                 arg_names: Sequence[str], metadata: Dict[str, Any]) -> None:
        self.name = name
        self.launcher = launcher
        self.device = device
        self.framework = framework
        self.arg_names = list(arg_names)
        # With TensorDescriptor parameters: how each argument expands (descriptor_arguments.
        # expansion; arg_names are the expanded names).
        self.expansion: Optional[tuple] = None
        self.metadata = metadata
        self.current_stream = _stream_function(device, framework)
        self.stream_type = sys.modules["torch"].Tensor if framework == "torch" else None

    def launch(self, grid, args: Sequence[Any]) -> None:
        if self.expansion is not None:  # TensorDescriptor arguments: expand them
            args = descriptor_arguments.expand(self.expansion, args)
        if self.metadata.get("global_scratch_size"):  # the kernel's last parameter
            args = list(args) + [allocation.global_scratch(self.name, self.metadata, grid,
                                                           self.current_stream())]
        try:
            self.launcher.launch(grid, self.current_stream(), args)
        except driver.ArgumentError as e:
            name = self.arg_names[e.index] if 0 <= e.index < len(self.arg_names) else "?"
            raise TypeError(f"{self.name}: argument '{name}': {e.reason}") from None
        except ValueError as e:  # the launcher's grid check: say which kernel
            if not str(e).startswith("grid"):
                raise
            raise ValueError(f"{self.name}: {e}") from None


def _stream_function(device: int, framework: str):
    """A no-argument callable giving the framework's current stream on ``device``, bound to
    the cheapest entry point (this runs on every launch)."""
    if framework == "torch":
        raw = getattr(sys.modules["torch"]._C, "_cuda_getCurrentRawStream", None)
        if raw is not None:
            return functools.partial(raw, device)
    return functools.partial(driver.current_stream, device, framework)


def _device_and_framework(kernel: str, names: Sequence[str], values: Sequence[Any]):
    for name, value in zip(names, values):
        if isinstance(value, (int, float, bool)):
            continue
        device = driver.device_of(value)
        if device < 0:
            raise TypeError(f"{kernel}: argument '{name}' is in host (CPU) memory; a GPU kernel "
                            f"needs CUDA tensors (or run in interpret mode)")
        return device, driver.framework_of(type(value))
    device, _ = driver.device_and_stream(values)
    return device, "torch" if "torch" in sys.modules else "other"


def kernel_cache_key(jit_fn, specialization, constexprs: Dict[str, Any], options) -> str:
    """The on-disk cache key of one specialization compiled with ``options`` (whose arch is
    the exact target, e.g. sm_90a: a cubin for sm_90 is a different entry)."""
    signature, div16, eq1, large = specialization
    described = {"signature": signature, "div16": sorted(div16), "eq1": sorted(eq1),
                 "constexprs": {k: repr(v) for k, v in constexprs.items()}}
    if large:  # only then: the keys of every other kernel stay what they were
        described["large"] = sorted(large)
    return cache_key(build_id=compiler_build_id(), source=jit_fn.source_key(),
                     specialization=described, options=options.key(), arch=options.arch)


def build(jit_fn, specialization, constexprs: Dict[str, Any], options,
          tile_ir=None) -> Tuple[Dict, bytes]:
    """(metadata, image) of one specialization: from the disk cache, else compiled and stored.

    The image is the cubin, or the PTX when no ptxas was found (the driver JIT assembles it).
    Needs no GPU: the autotuner runs this in worker processes to compile configs in parallel,
    passing the ``tile_ir`` it already built (compile_kernel then skips the front end).
    """
    cache = KernelCache()
    disk_key = kernel_cache_key(jit_fn, specialization, constexprs, options)
    entry = cache.get(disk_key)
    if entry is None:
        # Ranks and processes sharing the cache compile a missing kernel once: the others wait
        # on the key's lock file, then read what the first one wrote (always_compile: no
        # reads, so no waiting either).
        lock = cache.lock(disk_key) if not knobs.always_compile else contextlib.nullcontext()
        with lock:
            entry = cache.get(disk_key)
            if entry is None:
                compiled = compile_and_store(jit_fn, specialization, constexprs, options,
                                             tile_ir, keep_ir=False, key=disk_key)
                return dict(compiled.metadata), compiled.asm.get("cubin") or compiled.asm["ptx"]
    return json.loads(entry["metadata.json"]), entry.get("kernel.cubin") or entry["kernel.ptx"]


def compile_and_store(jit_fn, specialization, constexprs: Dict[str, Any], options,
                      tile_ir=None, keep_ir: bool = True, key: Optional[str] = None):
    """Compiles one specialization (the CompiledKernel; the IR stages' text only with
    ``keep_ir``, see compile_kernel) and stores its cubin in the disk cache under ``key``
    (default: its :func:`kernel_cache_key`), where the next :func:`build` of it finds it."""
    from ..compiler import compile_kernel

    signature, div16, eq1, large = specialization
    compiled = compile_kernel(jit_fn.fn, signature, constexprs, div16, eq1, options,
                              tile_ir=tile_ir, large_tensors=large, keep_ir=keep_ir)
    files = {"metadata.json": json.dumps(compiled.metadata, indent=1).encode(),
             "kernel.ptx": compiled.asm["ptx"].encode()}
    if "cubin" in compiled.asm:
        files["kernel.cubin"] = compiled.asm["cubin"]
    if key is None:
        key = kernel_cache_key(jit_fn, specialization, constexprs, options)
    KernelCache().put(key, files)
    return compiled


def prepare(jit_fn, values: List[Any], specialization, constexprs: Dict[str, Any],
            launch_options, built: Optional[Tuple[Dict, bytes]] = None,
            names: Optional[Sequence[str]] = None) -> Launchable:
    """Finds or compiles the cubin for this specialization and loads it on the device.

    ``launch_options``: a launch_options.LaunchOptions; ``built``: (metadata, image) from
    :func:`build` when the caller compiled it already (the autotuner compiles its configs in
    parallel, then loads each one here); ``names``: the runtime parameters ``values`` are
    for (default: all of them; parameters passed None are constexprs of the kernel).
    """
    kernel = jit_fn.__name__
    present = list(jit_fn.runtime_names if names is None else names)  # None ones are constexprs
    values_of_present = values
    names, values = descriptor_arguments.flatten(present, values)
    ok, why = driver.driver_available()
    if not ok:
        raise RuntimeError(f"{kernel}: no CUDA driver ({why}); run on a GPU machine, or set "
                           f"TESSERA_INTERPRET=1 (or @tessera.jit(interpret=True)) to run on "
                           f"the CPU")
    device, framework = _device_and_framework(kernel, names, values)
    options = launch_options.compile_options(arch_of(device))
    if built is None:
        built = build(jit_fn, specialization, constexprs, options)
    metadata, image = built
    signature = specialization[0]
    module = driver.load_module(image, device)
    function = module.function(metadata["name"])
    tensor_maps = bool(metadata.get("tensormaps"))
    kinds = descriptor_arguments.launch_kinds(present, signature, _launcher_kind, tensor_maps)
    if tensor_maps:  # the parameter names, tensor maps included, for the launcher's errors
        names = descriptor_arguments.flatten(present, values_of_present, True)[0]
    if metadata.get("global_scratch_size"):  # device tensor maps' scratch, passed last
        kinds.append("ptr")  # (such launches stay on the Python path, which allocates it)
        names = list(names) + ["global_scratch"]
    launcher = driver.KernelLauncher(kinds, function,
                                     num_warps=block_warps(metadata),
                                     shared_bytes=metadata.get("shared_bytes", 0))
    launchable = Launchable(kernel, launcher, device, framework, names, metadata)
    if len(names) - int(bool(metadata.get("global_scratch_size"))) != len(present):
        launchable.expansion = descriptor_arguments.expansion(present, signature, tensor_maps)
    return launchable
