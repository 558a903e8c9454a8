"""The CUtensorMap encoding arguments of host TensorDescriptors (TESSERA_TMA), on the CPU.

Checked against the driver API's rules written out independently here: dims innermost first,
byte strides of the outer dims, the box of the block (inner extent cut to the swizzle span),
the swizzle wgmma reads (min(128, row bytes)), the data type enum, and the OOB fill (zeros or
NaN). The emulated box (the interpreter's reference) is checked against NumPy slicing with
padding on fresh random ragged shapes."""
from collections import OrderedDict

import ml_dtypes
import numpy as np
import pytest

from tessera.runtime import tensor_map as tm
from tessera.tools.tensor_descriptor import TensorDescriptor


@pytest.mark.parametrize("dtype, code, itemsize", [(np.float16, 6, 2), (ml_dtypes.bfloat16, 9, 2),
                                                    (np.float32, 7, 4), (np.int8, 0, 1)])
@pytest.mark.parametrize("block", [[128, 64], [64, 32], [32, 16], [64, 128]])
def test_arguments_of_a_row_major_matrix(dtype, code, itemsize, block):
    m, k = 300, 224  # not multiples of the blocks; rows of 224 * itemsize bytes
    a = np.zeros((m, k), dtype)
    if block[-1] * itemsize < 16:
        pytest.skip("the descriptor itself needs 16-byte rows")
    args = tm.encode_arguments(TensorDescriptor.from_tensor(a, block))
    row_bytes = block[1] * itemsize
    span = min(128, row_bytes)
    assert args.data_type == code and args.rank == 2
    assert args.global_address == a.__array_interface__["data"][0]
    assert args.global_dim == [k, m]
    assert args.global_strides == [k * itemsize]
    assert args.swizzle == {32: 1, 64: 2, 128: 3}.get(span, 0)
    inner = span // itemsize if args.swizzle else block[1]
    assert args.box_dim == [inner, block[0]]
    assert args.element_strides == [1, 1]
    assert args.box_bytes == inner * block[0] * itemsize
    assert args.oob_fill == 0 and args.interleave == 0


def test_wide_rows_are_copied_in_128_byte_boxes():
    a = np.zeros((64, 512), np.float16)
    desc = TensorDescriptor.from_tensor(a, [64, 256])  # 512-byte rows: four column blocks
    args = tm.encode_arguments(desc)
    assert args.swizzle == tm.SWIZZLE_128B and args.box_dim == [64, 64]
    assert tm.boxes_per_block(desc) == 4


def test_strided_view_and_three_dims():
    big = np.zeros((4, 96, 160), np.float32)
    view = big[:, :, :80]  # strides of the parent, in bytes
    args = tm.encode_arguments(TensorDescriptor.from_tensor(view, [2, 32, 16]))
    assert args.global_dim == [80, 96, 4]
    assert args.global_strides == [160 * 4, 96 * 160 * 4]
    assert args.box_dim == [16, 32, 2] and args.swizzle == tm.SWIZZLE_64B


def test_nan_padding_asks_the_unit_for_nan():
    a = np.zeros((64, 64), np.float16)
    args = tm.encode_arguments(TensorDescriptor.from_tensor(a, [64, 64], padding="nan"))
    assert args.oob_fill == tm.OOB_FILL_NAN


def test_limits_are_named():
    a = np.zeros((1024, 64), np.float16)
    with pytest.raises(ValueError, match="box dims are at most 256"):
        tm.encode_arguments(TensorDescriptor.from_tensor(a, [512, 64]))


@pytest.mark.parametrize("padding", ["zero", "nan"])
def test_emulated_box_pads_out_of_bounds(padding):
    rng = np.random.default_rng()
    m, n = int(rng.integers(40, 100)), int(rng.integers(20, 50)) * 8
    a = rng.standard_normal((m, n)).astype(np.float16)
    args = tm.encode_arguments(TensorDescriptor.from_tensor(a, [32, 16], padding=padding))
    for row, col in [(0, 0), (m - 5, n - 3), (-4, 2), (m + 1, 0)]:
        box = tm.emulate_box(args, a, [col, row])
        ref = np.full((32, 16), np.nan if padding == "nan" else 0, np.float16)
        for i in range(32):
            for j in range(16):
                if 0 <= row + i < m and 0 <= col + j < n:
                    ref[i, j] = a[row + i, col + j]
        np.testing.assert_array_equal(box, ref)


# --- the launch side: kinds, the parameter buffer, the C++ checks (no driver needed) ---------

from tessera._tessera import runtime as _runtime  # noqa: E402
from tessera.runtime import descriptor_arguments, driver  # noqa: E402


def _aligned_map(rng):
    storage = np.zeros(192, np.uint8)
    start = -storage.ctypes.data % 64
    storage[start:start + 128] = rng.integers(0, 256, 128, dtype=np.uint8)
    return storage, storage.ctypes.data + start, storage[start:start + 128].tobytes()


def test_tensor_map_parameter_is_128_bytes_at_a_64_byte_offset():
    rng = np.random.default_rng()
    storage, address, content = _aligned_map(rng)
    launcher = driver.KernelLauncher(["ptr", "i32", "tensormap", "i32"], None, num_warps=4)
    packed = launcher.pack([0x1000, 7, address, -3])
    assert len(packed) == 64 + 128 + 4
    assert packed[:12] == (0x1000).to_bytes(8, "little") + (7).to_bytes(4, "little")
    assert packed[12:64] == bytes(52)  # padding up to .align 64
    assert packed[64:192] == content and packed[192:] == (-3).to_bytes(4, "little", signed=True)


def test_tensor_map_parameter_needs_an_aligned_address():
    launcher = driver.KernelLauncher(["tensormap"], None, num_warps=4)
    storage, address, _ = _aligned_map(np.random.default_rng())
    for bad in (0, address + 8, 1.5):
        with pytest.raises(Exception):
            launcher.pack([bad])


def test_launch_kinds_and_flattening_add_maps_of_2d_descriptors(monkeypatch):
    a = np.zeros((64, 64), np.float16)
    calls = []

    def fake_encode(desc):
        calls.append(desc)
        return bytes(range(128))

    monkeypatch.setattr(tm, "encode", fake_encode)
    monkeypatch.setattr(tm, "_ENCODED", OrderedDict())  # maps other fakes encoded stay apart
    d2 = TensorDescriptor.from_tensor(a, [32, 32])
    d1 = TensorDescriptor.from_tensor(np.zeros(64, np.float32), [16])
    signature = {"x": descriptor_arguments.type_text(descriptor_arguments.key(d2), "fp16"),
                 "y": descriptor_arguments.type_text(descriptor_arguments.key(d1), "fp32"),
                 "n": "i32"}
    kinds = descriptor_arguments.launch_kinds(["x", "y", "n"], signature, lambda t: t, True)
    assert kinds == ["ptr", "i32", "i32", "i64", "i64", "tensormap", "ptr", "i32", "i64", "i32"]
    assert descriptor_arguments.launch_kinds(["x"], signature, lambda t: t) == kinds[:5]
    names, values = descriptor_arguments.flatten(["x", "y", "n"], [d2, d1, 5], True)
    assert names[5] == "x.tensormap" and len(values) == len(kinds)
    assert values[5] % 64 == 0 and values[5] == tm.host_address(d2)  # encoded once, cached
    assert len(calls) == 1
    launcher = driver.KernelLauncher(kinds, None, num_warps=4)
    packed = launcher.pack([0x2000, 64, 64, 64, 1, values[5], 0x3000, 64, 1, 5])
    assert bytes(range(128)) in packed


def test_maps_are_encoded_once_per_content(monkeypatch):
    """Descriptors made afresh per call (tessera.ops' attention) reuse the encoded map of the
    same tensor, dtype, shape, strides, block and padding; any of those differing encodes."""
    calls = []
    monkeypatch.setattr(tm, "encode", lambda desc: calls.append(desc) or bytes(
        [len(calls)] * 128))
    monkeypatch.setattr(tm, "_ENCODED", OrderedDict())
    a = np.zeros((64, 128), np.float16)
    first = tm.host_address(TensorDescriptor.from_tensor(a, [32, 64]))
    again = tm.host_address(TensorDescriptor.from_tensor(a, [32, 64]))
    assert first == again and len(calls) == 1
    others = [TensorDescriptor.from_tensor(a, [64, 64]),  # block
              TensorDescriptor.from_tensor(a.view(np.int16), [32, 64]),  # dtype
              TensorDescriptor.from_tensor(a[:, :64], [32, 64]),  # shape
              TensorDescriptor.from_tensor(a[1:], [32, 64]),  # address
              TensorDescriptor(a, [64, 128], [128, 1], [32, 64], "nan")]  # padding
    addresses = {first} | {tm.host_address(d) for d in others}
    assert len(calls) == 6 and len(addresses) == 6
    assert all(address % 64 == 0 for address in addresses)
    # The bytes at each address are that descriptor's own encoding.
    import ctypes
    for d, expected in zip(others, range(2, 7)):
        assert ctypes.string_at(tm.host_address(d), 128) == bytes([expected] * 128)
    monkeypatch.setattr(tm, "ENCODED_LIMIT", 2)
    tm.host_address(TensorDescriptor.from_tensor(a, [16, 64]))
    assert len(tm._ENCODED) == 2  # the oldest dropped


def test_cpp_checks_the_encoding_arrays():
    a = np.zeros((300, 224), np.float16)
    args = tm.encode_arguments(TensorDescriptor.from_tensor(a, [128, 64]))
    _runtime.check_tensor_map_arguments(args.global_dim, args.global_strides, args.box_dim,
                                        args.element_strides, args.global_address)
    with pytest.raises(ValueError, match="global strides"):
        _runtime.check_tensor_map_arguments(args.global_dim, [], args.box_dim,
                                            args.element_strides, args.global_address)
    with pytest.raises(ValueError, match="box dims"):
        _runtime.check_tensor_map_arguments(args.global_dim, args.global_strides, [64, 512],
                                            args.element_strides, args.global_address)


def test_maps_only_for_descriptors_the_host_can_encode():
    from tessera.frontend.descriptor_parameters import DescriptorParameter

    def text(array, block):
        desc = TensorDescriptor.from_tensor(array, block)
        return descriptor_arguments.type_text(descriptor_arguments.key(desc),
                                              str(array.dtype).replace("float", "fp"))

    tall = text(np.zeros((1024, 64), np.float16), [512, 64])  # 512 rows: over TMA's 256
    fine = text(np.zeros((1024, 64), np.float16), [256, 64])
    flat = text(np.zeros(64, np.float16), [64])
    assert descriptor_arguments.has_tensor_map(fine)
    assert not descriptor_arguments.has_tensor_map(tall)
    assert not descriptor_arguments.has_tensor_map(flat)
    for t, expected in ((fine, True), (tall, False), (flat, False)):
        param = DescriptorParameter(t)
        assert param.has_tensor_map(True) is expected and not param.has_tensor_map(False)
        names = [n for n, _, _ in param.block_arguments("d", True)]
        assert (names[-1] == "d.tensormap") is expected
