"""The CUtensorMap encoding arguments of host TensorDescriptors (TESSERA_TMA), on the CPU.

Checked against the driver API's rules written out independently here: dims innermost first,
byte strides of the outer dims, the box of the block (inner extent cut to the swizzle span),
the swizzle wgmma reads (min(128, row bytes)), the data type enum, and the OOB fill (zeros or
NaN). The emulated box (the interpreter's reference) is checked against NumPy slicing with
padding on fresh random ragged shapes."""
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
