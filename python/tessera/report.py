"""Per-kernel report: why a kernel is as fast as it is.

One call compiles a kernel for the given arguments (an autotuned kernel: for the config its
autotuner picks) and prints what the hardware will see and, on a GPU, what it did:

* static (any machine, for a chosen arch): registers per thread, spilled bytes, stack, shared
  memory (codegen's dynamic bytes + ptxas's static bytes), and the theoretical occupancy
  (resident blocks and warps per multiprocessor and what limits them: the autotuner's
  resource model, ``tessera.autotuner.resources``, device/resources.py);
* measured (GPU): the time per launch (``tessera.testing.do_bench``);
* the kernel's model, given by the caller (``bytes=``, ``flops=``: numbers, or callables of
  the bound arguments by name, meta-parameters included): the arithmetic intensity, the
  roofline time ``max(bytes / peak bandwidth, flops / peak tensor FLOP/s)`` and, with a time,
  the fraction of each peak reached. Peaks per device: ``PEAKS`` (docs/report.md).

Example::

    import tessera
    rep = add_kernel.report(x, y, out, n, BLOCK=1024, grid=(tessera.cdiv(n, 1024),),
                            bytes=3 * 4 * n, flops=n)          # prints, returns a KernelReport
    rep = attention_kernel.report(..., grid=grid, arch="sm_90a")  # static part, no GPU needed

Command line: ``python -m tessera.report module:function`` (or ``path/to/script.py``, whose
``report_cases`` function is used) calls the function, which returns cases made by
:func:`case`, and prints one report per case (``--arch sm_90a`` for the static part on a
machine without a GPU; ``--json``).
"""
from __future__ import annotations

import argparse
import contextvars
import importlib
import json
import runpy
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from .device import resources
from .device.driver import DeviceProperties

Model = Union[None, int, float, Callable[[Dict[str, Any]], float]]

# Peak DRAM bandwidth (bytes/s) and dense fp16/bf16 tensor-core throughput (FLOP/s), by a
# substring of the device name (first match wins); the vendors' data sheets (SXM parts).
PEAKS: List[Tuple[str, float, float]] = [
    ("H200", 4.8e12, 989e12),
    ("H100 PCIe", 2.0e12, 756e12),
    ("H100", 3.35e12, 989e12),
    ("A100", 2.0e12, 312e12),
]
# The device a bare arch stands for in the static report (its SM count and shared memory).
ARCH_DEVICES = {"sm_80": "NVIDIA A100-SXM4-80GB", "sm_90a": "NVIDIA H100 80GB HBM3",
                "sm_90": "NVIDIA H100 80GB HBM3"}
_ARCH_PROPERTIES = {  # as the driver reports them for those devices
    "sm_80": DeviceProperties(0, ARCH_DEVICES["sm_80"], (8, 0), 108, 1024, 32, 49152, 166912,
                              167936, 65536, 41943040),
    "sm_90a": DeviceProperties(0, ARCH_DEVICES["sm_90a"], (9, 0), 132, 1024, 32, 49152, 232448,
                               233472, 65536, 52428800),
}
_ARCH_PROPERTIES["sm_90"] = _ARCH_PROPERTIES["sm_90a"]

# The arch a static report compiles for, while an autotuner's pruning runs for it: configs
# that depend on the arguments' GPU (the attention kernels' wgmma tiles) read it for
# arguments on no GPU (``static_arch.get("")``).
static_arch: contextvars.ContextVar[str] = contextvars.ContextVar("static_arch", default="")


def peaks(device_name: str) -> Optional[Tuple[float, float]]:
    """(bytes/s, FLOP/s) of a device by name, or None when it is not in PEAKS."""
    for key, bandwidth, flops in PEAKS:
        if key in device_name:
            return bandwidth, flops
    return None


@dataclass
class KernelReport:
    """What :func:`report` found; ``str()`` is the printed table."""
    kernel: str
    arch: str
    device: str
    config: Dict[str, Any] = field(default_factory=dict)
    num_warps: int = 4
    num_stages: int = 1
    registers: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack_bytes: int = 0
    shared_bytes: int = 0          # dynamic: rings and scratch (codegen)
    static_shared_bytes: int = 0   # ptxas
    blocks_per_sm: int = 0
    occupancy: float = 0.0         # resident warps / the multiprocessor's maximum
    limited_by: str = ""
    time_ms: Optional[float] = None
    bytes: Optional[float] = None
    flops: Optional[float] = None
    peak_bandwidth: Optional[float] = None
    peak_flops: Optional[float] = None

    @property
    def roofline_ms(self) -> Optional[float]:
        """The least time the model allows on this device's peaks."""
        if self.peak_bandwidth is None or (self.bytes is None and self.flops is None):
            return None
        return 1e3 * max((self.bytes or 0) / self.peak_bandwidth,
                         (self.flops or 0) / self.peak_flops)

    def fraction(self, which: str) -> Optional[float]:
        """Fraction of the device's peak reached: "bandwidth" or "flops" (needs a time)."""
        amount, peak = ((self.bytes, self.peak_bandwidth) if which == "bandwidth"
                        else (self.flops, self.peak_flops))
        if self.time_ms is None or amount is None or peak is None:
            return None
        return amount / (self.time_ms * 1e-3) / peak

    def as_dict(self) -> Dict[str, Any]:
        data = asdict(self)
        data.update(roofline_ms=self.roofline_ms, bandwidth_fraction=self.fraction("bandwidth"),
                    flops_fraction=self.fraction("flops"))
        return data

    def __str__(self) -> str:
        config = ", ".join(f"{k}={v}" for k, v in self.config.items())
        rows = [f"{self.kernel} [{self.arch}, {self.device}]" + (f" ({config})" if config
                                                                 else ""),
                f"  warps x stages      {self.num_warps} x {self.num_stages}",
                f"  registers/thread    {self.registers}",
                f"  spills (st/ld)      {self.spill_stores} / {self.spill_loads} bytes"
                f" (stack {self.stack_bytes})",
                f"  shared memory       {self.shared_bytes} dynamic + "
                f"{self.static_shared_bytes} static bytes",
                f"  occupancy           {self.blocks_per_sm} blocks/SM, "
                f"{100 * self.occupancy:.0f}% of warps (limited by {self.limited_by})"]
        rows.append("  time                " + (f"{1e3 * self.time_ms:.1f} us"
                                                 if self.time_ms is not None else NEEDS_GPU))
        if self.bytes is not None or self.flops is not None:
            rows.append(f"  model               {_si(self.bytes, 'B')}, "
                        f"{_si(self.flops, 'FLOP')}"
                        + (f", {self.flops / self.bytes:.1f} FLOP/B"
                           if self.bytes and self.flops else ""))
        if self.roofline_ms is not None:
            rows.append(f"  roofline time       {1e3 * self.roofline_ms:.1f} us "
                        f"(peaks {_si(self.peak_bandwidth, 'B/s')}, "
                        f"{_si(self.peak_flops, 'FLOP/s')})")
        for which, label in (("bandwidth", "memory bandwidth"), ("flops", "tensor cores")):
            value = self.fraction(which)
            if value is not None:
                rows.append(f"  {label + ' of peak':<19} {100 * value:.1f}%")
            elif self.time_ms is None and (self.bytes if which == "bandwidth"
                                           else self.flops) is not None:
                rows.append(f"  {label + ' of peak':<19} {NEEDS_GPU}")
        return "\n".join(rows)


# What the columns that need a measured time show in a static report (no GPU).
NEEDS_GPU = "needs a GPU"
TABLE_COLUMNS = ("kernel", "config", "regs", "spill st/ld B", "smem B", "blocks/SM",
                 "occupancy", "time us", "roofline us", "BW of peak", "TC of peak")


def table(reports: List[KernelReport]) -> str:
    """One row per report: the ptxas-side figures (registers, spills, shared memory, the
    theoretical occupancy from the arch's limits) and the measured ones, which read
    "needs a GPU" in a static report.

    Example::

        print(table([report(k, *args, grid=grid, arch="sm_80", file=None)]))
    """
    def cell(value: Optional[float], scale: float, digits: int, percent: bool = False) -> str:
        if value is None:
            return NEEDS_GPU
        return f"{scale * value:.{digits}f}" + ("%" if percent else "")

    rows = [TABLE_COLUMNS]
    for rep in reports:
        config = ",".join(f"{k.replace('BLOCK_', '')}={v}" for k, v in rep.config.items()
                          if k not in ("num_warps", "num_stages"))
        rows.append((
            rep.kernel, f"{config}{',' if config else ''}w{rep.num_warps}s{rep.num_stages}",
            str(rep.registers), f"{rep.spill_stores}/{rep.spill_loads}",
            str(rep.shared_bytes + rep.static_shared_bytes), str(rep.blocks_per_sm),
            f"{100 * rep.occupancy:.0f}%", cell(rep.time_ms, 1e3, 1),
            "-" if rep.roofline_ms is None else f"{1e3 * rep.roofline_ms:.1f}",
            cell(rep.fraction("bandwidth"), 100, 1, True) if rep.bytes is not None else "-",
            cell(rep.fraction("flops"), 100, 1, True) if rep.flops is not None else "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(TABLE_COLUMNS))]
    arches = sorted({rep.arch for rep in reports})
    lines = [f"# {', '.join(arches)}" + ("" if any(r.time_ms is not None for r in reports)
                                         else " (static: no GPU, so no times)")]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines)


def _si(value: Optional[float], unit: str) -> str:
    if value is None:
        return f"- {unit}"
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {prefix}{unit}"
    return f"{value:g} {unit}"


def _on_gpu(args) -> bool:
    return any(getattr(getattr(a, "device", None), "type", None) == "cuda" for a in args)


def _chosen(kernel, args, kwargs, grid, measure: bool, arch: str):
    """(jit function, kwargs with the config's meta-parameters, config dict): the config an
    autotuner picks (its ``_report_choice``: the tuned one, tuning with one launch when
    `measure`, else its untuned first config), else the kernel itself."""
    choose = getattr(kernel, "_report_choice", None)
    if choose is None:
        return kernel, dict(kwargs), {}
    return choose(args, kwargs, grid, measure, arch)


def _model(value: Model, named: Dict[str, Any]) -> Optional[float]:
    return value(named) if callable(value) else (None if value is None else float(value))


def report(kernel, *args, grid, bytes: Model = None, flops: Model = None,
           arch: Optional[str] = None, measure: Optional[bool] = None, file=sys.stdout,
           **kwargs) -> KernelReport:
    """Compiles `kernel` (a @jit function or an @autotune'd one) for these arguments, prints
    its report to `file` (None: not printed) and returns it as a :class:`KernelReport`.

    Args:
        args, kwargs: the kernel's arguments, as for ``kernel[grid](*args, **kwargs)``.
        grid: the launch grid (tuple or callable of the meta-parameters), for the timing.
        bytes, flops: the kernel's model: numbers, or callables of the arguments by name
            (meta-parameters included) returning one.
        arch: the target of the static part (default: the GPU's, else sm_90a).
        measure: time the kernel (default: when a CUDA driver is there and some argument is
            a CUDA tensor).

    Example::

        rep = matmul_kernel.report(a, b, c, M, N, K, grid=grid, flops=2 * M * N * K,
                                   bytes=2 * (M * K + K * N + M * N))
        print(rep.spill_stores, rep.occupancy, rep.fraction("flops"))
    """
    from .device import driver
    if measure is None:
        measure = _on_gpu(args) and driver.driver_available()[0]
    if measure:
        from .runtime.launcher import arch_of
        props = driver.get_device_properties(0)
        arch = arch or arch_of(0)
    else:
        arch = arch or "sm_90a"
        if arch not in _ARCH_PROPERTIES:
            raise ValueError(f"report({kernel.__name__}): no device properties for arch "
                             f"{arch!r} without a GPU; use one of {sorted(_ARCH_PROPERTIES)}")
        props = _ARCH_PROPERTIES[arch]
    jit_fn, final, config = _chosen(kernel, args, kwargs, grid, measure, arch)
    num_warps, num_stages = final.pop("num_warps", 4), final.pop("num_stages", 1)
    for extra in ("num_ctas", "maxnreg"):
        final.pop(extra, None)
    compiled = jit_fn.compile(*args, arch=arch, num_warps=num_warps, num_stages=num_stages,
                              **final)
    meta = compiled.metadata
    needs = resources.from_metadata({**meta, "shared_bytes": meta.get("shared_bytes", 0)
                                     + meta.get("static_shared_bytes", 0)})
    blocks, limiter = resources.occupancy(needs, props)
    max_threads, _ = resources.resident_limits(props)
    named = {**{p.name: p.default for p in jit_fn.params
                if p.default is not __import__("inspect").Parameter.empty},
             **dict(zip([p.name for p in jit_fn.params], args)), **final,
             "num_warps": num_warps, "num_stages": num_stages}
    time_ms = None
    if measure:
        from .testing import do_bench
        time_ms = do_bench(lambda: jit_fn[grid](*args, num_warps=num_warps,
                                                num_stages=num_stages, **final))
    peak = peaks(props.name) or (None, None)
    result = KernelReport(
        kernel=jit_fn.__name__, arch=arch, device=props.name, config=config,
        num_warps=num_warps, num_stages=num_stages,
        **{k: int(meta.get(k, 0) or 0) for k in ("registers", "spill_stores", "spill_loads",
                                                 "stack_bytes", "shared_bytes",
                                                 "static_shared_bytes")},
        blocks_per_sm=blocks, occupancy=blocks * needs.threads / max_threads,
        limited_by=limiter, time_ms=time_ms, bytes=_model(bytes, named),
        flops=_model(flops, named), peak_bandwidth=peak[0], peak_flops=peak[1])
    if file is not None:
        print(result, file=file)
    return result


def report_method(self, *args, **kwargs) -> KernelReport:
    """``kernel.report(*args, grid=..., bytes=..., flops=..., **kwargs)``: see :func:`report`."""
    return report(self, *args, **kwargs)


@dataclass
class Case:
    """One kernel launch to report: ``report(kernel, *args, **kwargs)``."""
    kernel: Any
    args: tuple
    kwargs: Dict[str, Any]


def case(kernel, *args, **kwargs) -> Case:
    """A launch for ``python -m tessera.report``; arguments as :func:`report` takes them.

    Example::

        def report_cases():
            x = np.zeros(1 << 20, np.float32)
            return [case(add_kernel, x, x, x, x.size, BLOCK=1024, grid=(1024,), bytes=12 << 20)]
    """
    return Case(kernel, args, kwargs)


def _load(target: str) -> Callable[[], Any]:
    if target.endswith(".py"):
        namespace = runpy.run_path(target, run_name="tessera_report")
        if "report_cases" not in namespace:
            raise SystemExit(f"tessera.report: {target} defines no report_cases() function")
        return namespace["report_cases"]
    module, _, name = target.partition(":")
    function = getattr(importlib.import_module(module), name or "report_cases", None)
    if function is None:
        raise SystemExit(f"tessera.report: {module} has no function {name or 'report_cases'}")
    return function


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tessera.report", description=(
        "Print the per-kernel report (registers, spills, shared memory, occupancy, time, "
        "model and roofline) of each case a function returns."))
    parser.add_argument("target", help="module:function or script.py (its report_cases())")
    parser.add_argument("--arch", help="target of the static part (default: the GPU's, "
                        "else sm_90a)")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument("--table", action="store_true", help="one row per kernel")
    options = parser.parse_args(argv)
    # The cases are made for the reported arch: a function that picks its tiles per arch
    # (masked attention's report_cases) reads it as the autotuners' pruning does.
    token = static_arch.set(options.arch or "")
    try:
        cases = _load(options.target)()
    finally:
        static_arch.reset(token)
    results = []
    for item in cases:
        kwargs = dict(item.kwargs)
        if options.arch:
            kwargs["arch"] = options.arch
        result = report(item.kernel, *item.args, file=None, **kwargs)
        results.append(result)
        if not options.table:
            print(json.dumps(result.as_dict()) if options.json else f"{result}\n")
    if options.table:
        print(table(results))
    return 0


if __name__ == "__main__":
    # Run the importable module's main, not this __main__ copy: library code reads
    # tessera.report.static_arch, which must be the one report() sets.
    from tessera.report import main as _main
    sys.exit(_main())
