"""Stand-ins for the GPU in tests of the launch paths (python/tessera/jit.py and
cpp/bindings/launch.cpp): kernels "prepare" into launchers without a kernel, which the C++ fast
path records instead of launching, and the Python path's launches are recorded too."""
from __future__ import annotations

import struct
from typing import Any, List

from tessera.config import knobs
from tessera.runtime import descriptor_arguments, driver, launcher

STREAM = 0x5EED


class RecordingLaunchable(launcher.Launchable):
    """A prepared kernel without a GPU: remembers what it was prepared for and what the Python
    path launched; the fast path's launches land in JITFunction._dispatch_recorded()."""

    def __init__(self, jit_fn, specialization, constexprs, options, names=None) -> None:
        names = list(jit_fn.runtime_names if names is None else names)
        # TensorDescriptors expand as launcher.prepare expands them, with their tensor maps
        # when TESSERA_TMA is on (as an sm_90a compile that copies them by TMA).
        tensor_maps = self.tensor_maps = bool(knobs.tma)
        signature = descriptor_arguments.launch_kinds(names, specialization[0],
                                                      launcher._launcher_kind, tensor_maps)
        super().__init__(jit_fn.__name__,
                         driver.KernelLauncher(signature, None, options.num_warps),
                         0, "other", expanded_names(names, specialization[0], tensor_maps),
                         {})
        if len(signature) != len(names):
            self.expansion = descriptor_arguments.expansion(names, specialization[0],
                                                            tensor_maps)
        self.current_stream = lambda: STREAM
        self.options = options
        self.prepared_for = (specialization, dict(constexprs), options.num_warps,
                             options.num_stages)
        self.python_launches: List[tuple] = []

    def launch(self, grid, args) -> None:
        """As Launchable.launch, through the real launcher (which parses the grid and packs
        the arguments), with tensors passed as their addresses (they are in host memory)."""
        expanded = args if self.expansion is None else \
            descriptor_arguments.expand(self.expansion, args)
        addresses = [address_of(a) for a in expanded]
        try:
            self.launcher.launch(grid, STREAM, addresses)
        except driver.CudaError as e:           # it has no kernel, and says so
            assert "no loaded kernel" in str(e)
        except driver.ArgumentError as e:       # as Launchable.launch says it
            raise TypeError(f"{self.name}: argument '{self.arg_names[e.index]}': "
                            f"{e.reason}") from None
        self.python_launches.append((grid, tuple(args), self.launcher.pack(addresses, STREAM)))


def expanded_names(names, signature, tensor_maps) -> List[str]:
    """The launcher's parameter names, as descriptor_arguments.flatten names them."""
    out: List[str] = []
    for name in names:
        text = signature[name]
        if not descriptor_arguments.is_descriptor_type(text):
            out.append(name)
            continue
        rank = len(descriptor_arguments.parse_type(text)[1])
        out += [f"{name}.base"] + [f"{name}.shape[{i}]" for i in range(rank)] \
            + [f"{name}.strides[{i}]" for i in range(rank)]
        out += [f"{name}.tensormap"] if tensor_maps and \
            descriptor_arguments.has_tensor_map(text) else []
    return out


def address_of(value):
    if hasattr(value, "data_ptr"):
        return value.data_ptr()
    if hasattr(value, "__array_interface__") and getattr(value, "ndim", 0) > 0:
        return value.__array_interface__["data"][0]
    return value


class FakeGpu:
    """Patches launcher.prepare; `prepared` lists every RecordingLaunchable made."""

    def __init__(self, monkeypatch) -> None:
        self.prepared: List[RecordingLaunchable] = []
        monkeypatch.setattr(launcher, "prepare", self.prepare)

    def prepare(self, jit_fn, values, specialization, constexprs, options, built=None,
                names=None):
        kernel = RecordingLaunchable(jit_fn, specialization, constexprs, options, names)
        self.prepared.append(kernel)
        return kernel

    def python_launch_count(self) -> int:
        return sum(len(k.python_launches) for k in self.prepared)


def fast_launch_count(kernel) -> int:
    recorded = kernel._dispatch_recorded()
    return 0 if recorded is None else recorded[4]


def expected_parameters(values: List[Any]) -> bytes:
    """The kernel parameter buffer, worked out here from the values alone: tensors pass their
    address, ints i32 (else i64, else u64), floats fp32, bools one byte; each parameter at its
    natural alignment."""
    buffer = b""
    for value in values:
        if isinstance(value, bool):
            fmt, raw = "<B", int(value)
        elif isinstance(value, int):
            fmt = "<i" if -2**31 <= value < 2**31 else "<q" if value < 2**63 else "<Q"
            raw = value
        elif isinstance(value, float):
            fmt, raw = "<f", value
        else:
            fmt, raw = "<Q", value.data_ptr()
        size = struct.calcsize(fmt)
        buffer += b"\0" * (-len(buffer) % size) + struct.pack(fmt, raw)
    return buffer
