"""Host time of a launch with 3 TensorDescriptor arguments, without a GPU: the C++ fast path
(``kernel[grid](...)``) against the Python path (``JITFunction.run``), each with and without
tensor maps (TESSERA_TMA's expansion: base, shape, strides, then the map's host address).

Kernels are "prepared" into launchers without a kernel, as benchmarks/launch_overhead.py
--dispatch-only does: the fast path records its launches instead of calling the driver; the
Python path expands and packs the parameters as Launchable.launch does (the driver call left
out). The maps' 128 bytes are a stand-in for cuTensorMapEncodeTiled's (cached by content as
on a GPU, tensor_map.host_address). Thread CPU time, best of 5 rounds (timeit).
Run: ``PYTHONPATH=python python benchmarks/launch_descriptors.py`` (docs/perf/launch_overhead.md).
"""
from __future__ import annotations

import timeit

import torch

import tessera
import tessera.language as tl
from tessera.config import knobs
from tessera.runtime import descriptor_arguments, driver, launcher
from tessera.runtime import tensor_map as tm
from tessera.tools.tensor_descriptor import TensorDescriptor


@tessera.jit
def three_descriptors(q_desc, k_desc, v_desc, out, n, BLOCK: tl.constexpr):
    pass  # never compiled: only launched


def use_recording_launchers() -> None:
    def prepare(jit_fn, values, specialization, constexprs, launch_options, built=None,
                names=None):  # launcher.prepare's signature
        names = list(jit_fn.runtime_names)
        maps = bool(knobs.tma)
        kinds = descriptor_arguments.launch_kinds(names, specialization[0],
                                                  launcher._launcher_kind, maps)
        kernel = launcher.Launchable(jit_fn.__name__, driver.KernelLauncher(kinds, None, 4), 0,
                                     "other", names, {})
        kernel.expansion = descriptor_arguments.expansion(names, specialization[0], maps)
        kernel.current_stream = int
        kernel.stream_type = torch.Tensor

        def launch(grid, args):  # Launchable.launch up to the driver: expand and pack
            expanded = descriptor_arguments.expand(kernel.expansion, args)
            kernel.launcher.pack([a.data_ptr() if isinstance(a, torch.Tensor) else a
                                  for a in expanded], 0)
        kernel.launch = launch
        return kernel

    launcher.prepare = prepare
    tm.encode = lambda desc: bytes(128)  # the driver's encoding, stood for


def best(statement, number=20000) -> float:
    timer = timeit.Timer(statement, timer=__import__("time").thread_time)
    return min(timer.repeat(5, number)) / number * 1e6


def main() -> None:
    use_recording_launchers()
    q, k, v = (torch.zeros(4096, 64, dtype=torch.float16) for _ in range(3))
    descs = [TensorDescriptor.from_tensor(t, [64, 64]) for t in (q, k, v)]
    out = torch.zeros(4096, 64, dtype=torch.float16)
    args = (*descs, out, 4096)
    print("3 TensorDescriptors + 1 tensor + 1 int, µs per launch (thread CPU time):")
    for maps in (False, True):
        knobs.tma = maps
        three_descriptors[(1,)](*args, BLOCK=64)  # the Python path compiles ("prepares")
        before = (three_descriptors._dispatch_recorded() or (0,) * 5)[4]
        fast = best(lambda: three_descriptors[(1,)](*args, BLOCK=64))
        after = three_descriptors._dispatch_recorded()[4]
        assert after - before == 5 * 20000, "not every launch took the fast path"
        run = best(lambda: three_descriptors.run(*args, grid=(1,), BLOCK=64), 5000)
        label = "with tensor maps" if maps else "without maps   "
        print(f"  {label}: fast path {fast:6.2f}   run() {run:6.2f}   ({run / fast:.1f}x)")
    knobs.reset("tma")


if __name__ == "__main__":
    main()
