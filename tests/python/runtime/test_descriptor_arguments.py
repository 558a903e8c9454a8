"""TensorDescriptor kernel arguments at launch, without a GPU: the specialization text, the
expansion into base, shape (int32) and strides (int64), and the parameter bytes the real
C++ launcher packs for them (a launcher without a kernel packs but does not launch)."""
import struct

import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.runtime import descriptor_arguments, driver, launcher
from tessera.specialization import argument_key, describe
from tessera.tools.tensor_descriptor import TensorDescriptor


def test_type_text_round_trip():
    x = np.zeros((48, 40), np.float16)
    desc = TensorDescriptor.from_tensor(x[:, :37], [16, 32], padding="nan")
    text, div16, eq1, large = describe(argument_key(desc))
    assert text == "tensordesc<fp16[16, 32],nan,div16=0>" and not div16 and not eq1
    assert not large  # a descriptor's offsets are int64 already (its shape and strides are)
    assert descriptor_arguments.parse_type(text) == ("fp16", [16, 32], "nan", [0])
    plain = describe(argument_key(TensorDescriptor.from_tensor(x[:, :37], [16, 32])))[0]
    assert descriptor_arguments.parse_type(plain) == ("fp16", [16, 32], "zero", [0])


def test_flatten_expands_only_descriptors():
    x = np.zeros((4, 8), np.float32)
    desc = TensorDescriptor.from_tensor(x, [4, 8])
    names, values = descriptor_arguments.flatten(["a", "d", "n"], [x, desc, 3])
    assert names == ["a", "d.base", "d.shape[0]", "d.shape[1]", "d.strides[0]",
                     "d.strides[1]", "n"]
    assert values[0] is x and values[1] is x and values[2:] == [4, 8, 8, 1, 3]
    assert descriptor_arguments.flatten(["a"], [x]) == (["a"], [x])


@tessera.jit
def uses_descriptor(x_ptr, d, n, BLOCK: tl.constexpr):
    d.store([0, 0], d.load([0, 0]) + n)


class RecordingLauncher:
    def __init__(self, kinds):
        self.real = driver.KernelLauncher(kinds, None, 4)
        self.packed = None

    def launch(self, grid, stream, args):
        addresses = [a.__array_interface__["data"][0] if isinstance(a, np.ndarray) else a
                     for a in args]
        self.packed = self.real.pack(addresses, stream)


def test_launch_packs_base_shape_and_strides():
    x = np.zeros((16, 40), np.float32)
    y = np.zeros((24, 36), np.float32)[:, :33]
    desc = TensorDescriptor.from_tensor(y, [8, 16])
    arguments = uses_descriptor._arguments((x, desc, 5), {"BLOCK": 16})
    spec = uses_descriptor._specialization(arguments[2])
    assert spec[0]["d"] == "tensordesc<fp32[8, 16]>"
    kinds = descriptor_arguments.launch_kinds(uses_descriptor.runtime_names, spec[0],
                                              launcher._launcher_kind)
    assert kinds == ["ptr", "ptr", "i32", "i32", "i64", "i64", "i32"]
    recording = RecordingLauncher(kinds)
    names, _ = descriptor_arguments.flatten(uses_descriptor.runtime_names, [x, desc, 5])
    launchable = launcher.Launchable("uses_descriptor", recording, 0, "other", names, {})
    launchable.expansion = descriptor_arguments.expansion(uses_descriptor.runtime_names,
                                                          spec[0], False)
    assert launchable.expansion == (None, False, None)
    launchable.current_stream = lambda: 0
    launchable.launch((1,), [x, desc, 5])
    expected = struct.pack("<QQiiqqi", x.__array_interface__["data"][0],
                           y.__array_interface__["data"][0], 24, 33, 36, 1, 5)
    assert recording.packed == expected


def test_compiled_signature_has_the_expanded_parameters():
    x = np.zeros((32, 32), np.float16)
    desc = TensorDescriptor.from_tensor(x, [16, 16])
    tir = uses_descriptor.asm(x, desc, 5, BLOCK=16, arch="sm_80")["tir"]
    signature = tir.split("func @uses_descriptor(", 1)[1].split(")", 1)[0]
    types = [part.split(": ")[1] for part in signature.split(", ")]
    assert types == ["ptr<f16>", "ptr<f16>", "i32", "i32", "i64", "i64", "i32"]
    # base 16-byte aligned, both dims of 32 divisible by 16, row stride a multiple of 8 halves
    assert "divisibility = [16, 16, 16, 16, 8, 1, 1]" in tir


def test_fast_path_takes_descriptor_launches_it_can_read():
    """The C++ fast path registers a kernel with descriptor parameters when it reads their
    bases as it reads plain pointer arguments (torch tensors, ...: tests/python/jit/
    test_descriptor_fast_path.py launches them); a NumPy base it does not read, nor a kernel
    whose launcher it cannot use: those launches stay on the Python path."""
    x = np.zeros((16, 16), np.float32)
    desc = TensorDescriptor.from_tensor(x, [16, 16])
    values, constexprs, _ = uses_descriptor._arguments((x, desc, 5), {"BLOCK": 16})
    assert not uses_descriptor._dispatch_register(tuple(values), tuple(constexprs), 4, 1,
                                                  object())
    torch = pytest.importorskip("torch")
    t = torch.zeros(16, 16)
    desc = TensorDescriptor.from_tensor(t, [16, 16])
    values, constexprs, _ = uses_descriptor._arguments((t, desc, 5), {"BLOCK": 16})
    kinds = ["ptr", "ptr", "i32", "i32", "i64", "i64", "i32"]
    launchable = launcher.Launchable("uses_descriptor", driver.KernelLauncher(kinds, None, 4),
                                     0, "other", [], {})
    launchable.current_stream = lambda: 0
    assert not uses_descriptor._dispatch_register(tuple(values), tuple(constexprs), 4, 1,
                                                  object())
    assert uses_descriptor._dispatch_register(tuple(values), tuple(constexprs), 4, 1,
                                              launchable)
    uses_descriptor._dispatch_clear()


def test_allocator_hook():
    from tessera.runtime.allocation import NullAllocator, get_allocator
    previous = get_allocator()
    try:
        tessera.set_allocator(NullAllocator())
        with pytest.raises(RuntimeError, match="set_allocator"):
            get_allocator()(16, 16, None)
    finally:
        tessera.set_allocator(previous)
