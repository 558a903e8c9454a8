"""The runtime binding without a GPU: driver status, clear errors, argument packing, tensor_info.

KernelLauncher(signature, None, ...) packs arguments exactly as a real launch does, without a
kernel, so the packing rules are checked here on the CPU (cpp/bindings/python_arguments.h).
"""
import math
import struct
from fractions import Fraction

import numpy as np
import pytest
from tessera.runtime import driver

AVAILABLE, REASON = driver.driver_available()
no_driver = pytest.mark.skipif(AVAILABLE, reason="a CUDA driver is present (see tests/gpu)")


def pack(signature, args, stream=0):
    return driver.KernelLauncher(signature, None, num_warps=4).pack(args, stream)


# ------------------------------------------------------------------------------- no driver

def test_driver_available_returns_a_reason():
    assert isinstance(AVAILABLE, bool)
    assert isinstance(REASON, str) and REASON


@no_driver
def test_no_driver_is_a_clear_error():
    assert "libcuda.so.1" in REASON or "CUDA" in REASON
    for call in (driver.device_count, driver.driver_version, lambda: driver.device_info(0),
                 lambda: driver.get_device_properties(0), lambda: driver.synchronize(0),
                 lambda: driver.load_module(b"\x7fELF not really", 0),
                 lambda: driver.jit_ptx_to_cubin(".version 8.0\n", 0)):
        with pytest.raises(driver.CudaError) as failure:
            call()
        assert "CUDA driver not available" in str(failure.value)
        assert isinstance(failure.value, RuntimeError)


@no_driver
def test_launching_without_a_kernel_raises_instead_of_crashing():
    launcher = driver.KernelLauncher(["ptr", "i32"], None, num_warps=4)
    with pytest.raises(driver.CudaError, match="no loaded kernel"):
        launcher.launch((1, 1, 1), 0, [0, 7])
    # An empty grid launches nothing, and needs nothing.
    launcher.launch((0,), 0, [0, 7])


@no_driver
def test_a_packed_launch_packs_now_and_launches_on_each_call():
    """driver.packed_launch (the driver floor of benchmarks/launch_overhead.py): the launcher's
    packing errors when made, the launcher's launch errors when called, no arguments."""
    launcher = driver.KernelLauncher(["ptr", "i32", "fp32"], None, num_warps=4)
    with pytest.raises(TypeError, match="takes 3 arguments, got 2"):
        driver.packed_launch(launcher, (1,), 0, [16, 5])
    with pytest.raises(driver.ArgumentError, match="argument 0: a numpy.ndarray in CPU memory"):
        driver.packed_launch(launcher, (1,), 0, [np.zeros(4, np.float32), 5, 1.0])
    floor = driver.packed_launch(launcher, (2, 3), 0x5EED, [16, 5, 1.5], False)
    for _ in range(2):
        with pytest.raises(driver.CudaError, match="no loaded kernel"):
            floor()
    with pytest.raises(TypeError, match="no arguments"):
        floor(1)


def test_launcher_validates_its_configuration():
    with pytest.raises(ValueError, match="unknown argument kind 'f32'"):
        driver.KernelLauncher(["ptr", "f32"], None, num_warps=4)
    with pytest.raises(ValueError, match="num_warps"):
        driver.KernelLauncher(["ptr"], None, num_warps=0)
    launcher = driver.KernelLauncher(["ptr", "fp16"], None, num_warps=8, shared_bytes=1024)
    assert launcher.signature == ["ptr", "fp16"]
    assert (launcher.num_warps, launcher.shared_bytes, launcher.function) == (8, 1024, None)


@pytest.mark.parametrize("grid, message", [
    ((-1,), "grid dimension 0"), ((1, 2, 3, 4), "1 to 3"), ((), "1 to 3"), ("abc", "grid"),
    ((1, 2.5), "dimension 1")])
def test_bad_grids(grid, message):
    launcher = driver.KernelLauncher(["i32"], None, num_warps=1)
    with pytest.raises((ValueError, TypeError), match=message):
        launcher.launch(grid, 0, [1])


# ------------------------------------------------------------------------------- packing

def test_parameter_buffer_layout():
    signature = ["ptr", "i32", "fp16", "bf16", "fp32", "u64", "i1", "i8", "i16", "fp64", "u32"]
    args = [0x1234_5678_9ABC, -5, 1.0, 1.0, 2.5, 2**64 - 1, True, -128, 300, -0.5, 2**32 - 1]
    expected = (struct.pack("<Qi", 0x1234_5678_9ABC, -5) + struct.pack("<e", 1.0)
                + bytes.fromhex("803f") + struct.pack("<f", 2.5) + b"\0" * 4
                + struct.pack("<Q", 2**64 - 1) + struct.pack("<?b h", True, -128, 300)
                + b"\0" * 4 + struct.pack("<d", -0.5) + struct.pack("<I", 2**32 - 1))
    assert pack(signature, args) == expected


@pytest.mark.parametrize("kind, good, bad", [
    ("i1", [0, 1, True, False], [2, -1]),
    ("i8", [-128, 127], [128, -129]),
    ("i16", [-32768, 32767], [32768]),
    ("i32", [-2**31, 2**31 - 1, np.int32(5), np.int64(-7)], [2**31, -2**31 - 1]),
    ("i64", [-2**63, 2**63 - 1], [2**63]),
    ("u32", [0, 2**32 - 1], [-1, 2**32]),
    ("u64", [0, 2**64 - 1], [-1, 2**64]),
])
def test_integer_ranges(kind, good, bad):
    for value in good:
        pack([kind], [value])
    for value in bad:
        with pytest.raises(driver.ArgumentError, match=rf"argument 0: .* does not fit {kind}"):
            pack([kind], [value])


def test_scalar_type_errors_name_the_argument():
    with pytest.raises(driver.ArgumentError) as failure:
        pack(["ptr", "i32"], [0, 1.5])
    assert failure.value.index == 1
    assert "expected an int for i32, got float" in failure.value.reason
    assert isinstance(failure.value, TypeError) and isinstance(failure.value, ValueError)
    with pytest.raises(driver.ArgumentError, match="expected a float for fp32, got str"):
        pack(["fp32"], ["1.0"])
    assert pack(["fp32"], [3]) == struct.pack("<f", 3.0)  # ints are fine for floats
    with pytest.raises(TypeError, match="takes 2 arguments, got 1"):
        pack(["ptr", "i32"], [0])


def test_pointer_arguments():
    assert pack(["ptr"], [None]) == b"\0" * 8
    assert pack(["ptr"], [2**64 - 1]) == b"\xff" * 8
    with pytest.raises(driver.ArgumentError, match="address must be in"):
        pack(["ptr"], [-16])
    with pytest.raises(driver.ArgumentError, match="expected a GPU tensor .* got str"):
        pack(["ptr"], ["not a tensor"])


def test_cpu_tensors_are_rejected_with_the_argument_index():
    host = np.zeros(16, dtype=np.float32)
    with pytest.raises(driver.ArgumentError) as failure:
        pack(["i32", "ptr"], [3, host])
    assert failure.value.index == 1
    assert "numpy.ndarray in CPU memory" in str(failure.value)


class FakeCudaArray:
    """A device array as CuPy or Numba would describe it (no memory behind it)."""

    def __init__(self, address, shape=(4, 6), typestr="<f4", strides=None):
        self.__cuda_array_interface__ = {"data": (address, False), "shape": shape,
                                         "typestr": typestr, "strides": strides, "version": 3}


class VersionedDLPack:
    """Exports NumPy memory through a DLPack 1.x ("dltensor_versioned") capsule."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__(max_version=(1, 0))

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_cuda_array_interface_objects_pass_their_address():
    assert pack(["ptr"], [FakeCudaArray(0x7F00_0000_1000)]) == struct.pack("<Q", 0x7F00_0000_1000)
    assert driver.extraction_protocol(FakeCudaArray(0)).startswith("cuda_array_interface")


def test_versioned_dlpack_capsules_are_read():
    wrapped = VersionedDLPack(np.arange(12, dtype=np.int16).reshape(3, 4)[:, ::2])
    assert driver.extraction_protocol(wrapped) == "dlpack"
    with pytest.raises(driver.ArgumentError, match="CPU memory"):
        pack(["ptr"], [wrapped])
    info = driver.tensor_info(wrapped)
    assert info[1:] == ("cpu", -1, "i16", (3, 2), (4, 2))
    assert info[0] == wrapped.array.__array_interface__["data"][0]


# ------------------------------------------------------------------ fp16 / bf16 rounding

def round_to_format(x: float, exponent_bits: int, mantissa_bits: int) -> int:
    """Reference: bits of x rounded to nearest even in a binary format (exact arithmetic)."""
    sign = 1 << (exponent_bits + mantissa_bits) if math.copysign(1.0, x) < 0 else 0
    bias = (1 << (exponent_bits - 1)) - 1
    max_exponent = (1 << exponent_bits) - 1
    if math.isnan(x):
        return sign | (max_exponent << mantissa_bits) | (1 << (mantissa_bits - 1))
    if math.isinf(x):
        return sign | (max_exponent << mantissa_bits)
    value = abs(Fraction(x))
    if value == 0:
        return sign
    exponent = max(math.floor(math.log2(value)), 1 - bias)
    while value >= Fraction(2) ** (exponent + 1):
        exponent += 1
    while value < Fraction(2) ** exponent and exponent > 1 - bias:
        exponent -= 1
    units = value / Fraction(2) ** (exponent - mantissa_bits)  # ulps
    rounded = math.floor(units)
    remainder = units - rounded
    if remainder > Fraction(1, 2) or (remainder == Fraction(1, 2) and rounded % 2):
        rounded += 1
    if rounded >= 2 << mantissa_bits:
        rounded //= 2
        exponent += 1
    if rounded < (1 << mantissa_bits):  # subnormal (or zero)
        return sign | rounded
    biased = exponent + bias
    if biased >= max_exponent:
        return sign | (max_exponent << mantissa_bits)
    return sign | (biased << mantissa_bits) | (rounded - (1 << mantissa_bits))


SPECIAL_VALUES = [0.0, -0.0, 1.0, -2.5, 65504.0, 65519.99, 65520.0, 1e6, -1e300, 6.1e-5,
                  5.96e-8, 2.98e-8, 2.99e-8, 1e-10, 1.0 + 2**-11, 1.0 + 3 * 2**-11,
                  1.0 + 2**-8, 1.0 + 3 * 2**-8, 3.3895e38, 3.4e38, 1.2e-38, 9.2e-41,
                  math.inf, -math.inf, 1 / 3, math.pi]


def test_fp16_and_bf16_round_to_nearest_even():
    rng = np.random.default_rng(0)
    values = SPECIAL_VALUES + list(rng.standard_normal(2000) * 10.0 ** rng.integers(-9, 6, 2000))
    signature = ["fp16", "bf16"] * len(values)
    args = [v for v in values for _ in range(2)]
    packed = np.frombuffer(pack(signature, args), dtype="<u2").reshape(-1, 2)
    for value, (half, bfloat) in zip(values, packed):
        assert half == round_to_format(value, 5, 10), value
        with np.errstate(over="ignore"):
            assert half == np.array(value, dtype=np.float16).view(np.uint16), value
        assert bfloat == round_to_format(value, 8, 7), value


def test_nan_stays_nan():
    half, bfloat = np.frombuffer(pack(["fp16", "bf16"], [math.nan, math.nan]), dtype="<u2")
    assert np.isnan(np.array(half, dtype=np.uint16).view(np.float16))
    assert (bfloat & 0x7F80) == 0x7F80 and (bfloat & 0x7F) != 0


# ------------------------------------------------------------------------------- tensor_info

@pytest.mark.parametrize("dtype, name", [(np.float32, "fp32"), (np.float16, "fp16"),
                                         (np.float64, "fp64"), (np.int8, "i8"),
                                         (np.uint8, "u8"), (np.int64, "i64"), (np.bool_, "i1")])
def test_tensor_info_numpy(dtype, name):
    array = np.zeros((5, 8), dtype=dtype)[1:, ::2]
    assert driver.tensor_info(array) == (array.__array_interface__["data"][0], "cpu", -1, name,
                                         (4, 4), (8, 2))


def test_tensor_info_cuda_array_interface():
    info = driver.tensor_info(FakeCudaArray(0x1000, shape=(4, 6), typestr="<f2",
                                            strides=(24, 2)))
    assert info[:2] == (0x1000, "cuda") and info[3:] == ("fp16", (4, 6), (12, 1))
    contiguous = driver.tensor_info(FakeCudaArray(0x2000, shape=(2, 3, 5), typestr="|u1"))
    assert contiguous[3:] == ("u8", (2, 3, 5), (15, 5, 1))


def test_tensor_info_errors():
    with pytest.raises(TypeError, match="needs a tensor"):
        driver.tensor_info(3)
    with pytest.raises(TypeError, match="unsupported"):
        driver.tensor_info(np.zeros(3, dtype=np.complex64))


def test_device_and_stream_without_gpu_tensors():
    assert driver.device_and_stream([1, 2.0, None]) == (0, 0)
    assert driver.device_and_stream([np.zeros(3)]) == (0, 0)  # the launcher rejects it later
    assert driver.framework_of(np.ndarray) == "numpy"
