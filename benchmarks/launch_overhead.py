"""Host launch overhead: seconds of host time per launch of a tiny kernel, Tessera vs Triton.

Method (docs/benchmarks.md): best of 3 rounds of 20000 launches each, with 3 and with 16
tensor arguments, measured in the same process; the GPU work is negligible, so the number is
the host cost of binding, specializing, packing and cuLaunchKernel.

The driver floor, measured in the same run: the very cubin Tessera launched, its parameters,
grid and stream packed once (driver.packed_launch), relaunched by a no-argument C call that
does only what Tessera's launch does around the driver (cuCtxGetCurrent, cuLaunchKernel
without the GIL); "above the floor" is what Tessera adds to it (docs/perf/launch_overhead.md).

``--dispatch-only`` (the default without a GPU) measures Tessera's launch path up to the driver
call: kernels are "prepared" into launchers without a kernel, whose launches the C++ fast path
(cpp/bindings/launch.cpp) records instead of calling cuLaunchKernel; tensors are CPU tensors.
It times the thread's CPU time, not the wall clock: nothing waits there, so on an idle machine
the two agree, and on a shared one the CPU time leaves out the time other processes ran.
"""
from __future__ import annotations

import argparse
import json
import time
from typing import Callable, Dict

import torch

import tessera
import tessera.language as tl


@tessera.jit
def tiny3(a, b, c, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(c + offs, tl.load(a + offs) + tl.load(b + offs))


@tessera.jit
def tiny16(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, out,
           BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(a0 + offs) + tl.load(a14 + offs))


CLOCK: Callable[[], float] = time.perf_counter  # time.thread_time in --dispatch-only


def time_launches(launch: Callable[[], None], sync: Callable[[], None], n=20000,
                  rounds=3) -> float:
    launch()
    sync()
    best = float("inf")
    for _ in range(rounds):
        t0 = CLOCK()
        for _ in range(n):
            launch()
        t1 = CLOCK()
        sync()
        best = min(best, (t1 - t0) / n)
    return best


def use_recording_launchers() -> None:
    """Kernels prepare into launchers without a kernel (nothing compiles, no GPU needed)."""
    from tessera.runtime import driver, launcher

    def prepare(jit_fn, values, specialization, constexprs, launch_options, built=None,
                names=None):  # launcher.prepare's signature
        kinds = [launcher._launcher_kind(specialization[0][n]) for n in jit_fn.runtime_names]
        kernel = launcher.Launchable(jit_fn.__name__,
                                     driver.KernelLauncher(kinds, None, launch_options.num_warps),
                                     0, "other", jit_fn.runtime_names, {})
        kernel.current_stream = int             # int() == 0, the legacy default stream
        # The fast path reads the stream as on a GPU: one C call to torch's DLPack exchange
        # table (a CPU build of torch reports no stream: 0).
        kernel.stream_type = torch.Tensor
        kernel.launch = lambda grid, args: None  # the first launch, on the Python path
        return kernel

    launcher.prepare = prepare


def measure_tessera(ts, sync) -> Dict[str, float]:
    return {"tessera_3": time_launches(lambda: tiny3[(1,)](ts[0], ts[1], ts[2], BLOCK=128), sync),
            "tessera_16": time_launches(lambda: tiny16[(1,)](*ts, BLOCK=128), sync)}


def measure_floor(ts) -> Dict[str, float]:
    """The driver floor of each kernel: its last launch repeated with the parameters packed
    once, with the GIL released around cuLaunchKernel (as every Tessera launch) and held."""
    from tessera.runtime import driver

    results = {}
    for kernel, args, count in ((tiny3, ts[:3], 3), (tiny16, ts, 16)):
        (launchable,) = kernel._kernels.values()  # the one specialization launched above
        stream = launchable.current_stream()
        for name, release in (("floor", True), ("floor_gil_held", False)):
            floor = driver.packed_launch(launchable.launcher, (1,), stream, args, release)
            results[f"{name}_{count}"] = time_launches(lambda: floor(), torch.cuda.synchronize)
    return results


def measure_triton(ts) -> Dict[str, float]:
    import triton
    import triton.language as ttl

    @triton.jit
    def ttiny3(a, b, c, BLOCK: ttl.constexpr):
        offs = ttl.arange(0, BLOCK)
        ttl.store(c + offs, ttl.load(a + offs) + ttl.load(b + offs))

    @triton.jit
    def ttiny16(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, out,
                BLOCK: ttl.constexpr):
        offs = ttl.arange(0, BLOCK)
        ttl.store(out + offs, ttl.load(a0 + offs) + ttl.load(a14 + offs))

    sync = torch.cuda.synchronize
    return {"triton_3": time_launches(lambda: ttiny3[(1,)](ts[0], ts[1], ts[2], BLOCK=128), sync),
            "triton_16": time_launches(lambda: ttiny16[(1,)](*ts, BLOCK=128), sync)}


def report(results: Dict[str, float], title: str) -> None:
    """The table (µs per launch), Tessera's cost above the driver floor, and what each of the
    13 arguments the 16-argument kernel adds costs (ns), row by row."""
    if "floor_3" in results:
        for n in (3, 16):
            results[f"above_floor_{n}"] = results[f"tessera_{n}"] - results[f"floor_{n}"]
    print(f"{title:<20} {'3 args':>8} {'16 args':>8}")
    rows = (("floor", "driver floor"), ("floor_gil_held", "  GIL held"),
            ("tessera", "tessera"), ("above_floor", "  above the floor"), ("triton", "triton"))
    for name, label in rows:
        if f"{name}_3" in results:
            print(f"{label:<20} {results[f'{name}_3'] * 1e6:>8.2f} "
                  f"{results[f'{name}_16'] * 1e6:>8.2f}")
    if "torch_add" in results:
        print(f"{'torch.add':<20} {results['torch_add'] * 1e6:>8.2f}")
    added = [(label.strip(), (results[f"{name}_16"] - results[f"{name}_3"]) / 13)
             for name, label in rows if f"{name}_3" in results and name != "above_floor"]
    print("ns per added argument: " + ", ".join(f"{label} {cost * 1e9:.0f}"
                                                for label, cost in added))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", default=None)
    parser.add_argument("--dispatch-only", action="store_true",
                        help="measure the launch path without the driver (default without a GPU)")
    args = parser.parse_args()
    dispatch_only = args.dispatch_only or not torch.cuda.is_available()
    results: Dict[str, float] = {}
    if dispatch_only:
        global CLOCK
        CLOCK = time.thread_time
        use_recording_launchers()
        ts = [torch.randn(128) for _ in range(16)]
        results.update(measure_tessera(ts, lambda: None))
        assert tiny16._dispatch_recorded() is not None, "the fast path did not launch"
    else:
        ts = [torch.randn(128, device="cuda") for _ in range(16)]
        results.update(measure_tessera(ts, torch.cuda.synchronize))
        results.update(measure_floor(ts))
        try:
            results.update(measure_triton(ts))
        except ImportError:
            print("triton not installed: no anchor")
        results["torch_add"] = time_launches(lambda: torch.add(ts[0], ts[1], out=ts[2]),
                                             torch.cuda.synchronize)
    report(results, "dispatch only (µs)" if dispatch_only else "launch (µs/launch)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
