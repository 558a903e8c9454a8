"""Casts (`x.to`, `tl.cast`), literal types and broadcasting, as Triton defines them.

Each cast case names the IR ops Triton's semantic.cast would emit for that pair (read from its
rules: sign- vs zero-extension by the source's signedness, fp16/bf16 through fp32, bool as
`!= 0`); broadcasting cases check the shapes NumPy's rules give.
"""
import pytest

import tessera.language as tl
from tessera.errors import CompilationError
from tessera.frontend import build_module
from tessera.language.semantic import broadcast_shapes, to_tensor_type


def cast_kernel(src_ptr, dst_ptr, DST: tl.constexpr, BITCAST: tl.constexpr):
    x = tl.load(src_ptr)
    y = x.to(DST, bitcast=BITCAST)
    tl.static_assert(y.dtype == DST)
    tl.store(dst_ptr, y.to(dst_ptr.dtype.element_ty))


def cast_ops(src, dst, dst_sig, bitcast=False):
    module = build_module(cast_kernel, {"src_ptr": "*" + src, "dst_ptr": "*" + dst_sig},
                          {"DST": dst, "BITCAST": bitcast})
    module.verify()
    ops = [op.name for op in module.functions()[0].body(0).operations]
    # Between the load and the store: the conversion itself (an int1 load is an int8 load
    # followed by `!= 0`, which comes first).
    first = ops.index("load") + (3 if src == "i1" else 1)
    return ops[first:ops.index("store")]


@pytest.mark.parametrize("src,dst,dst_sig,expected", [
    ("i1", tl.int32, "i32", ["extui"]),
    ("i8", tl.int32, "i32", ["extsi"]),
    ("u8", tl.int32, "i32", ["extui"]),
    ("i32", tl.int8, "i8", ["trunci"]),
    ("i32", tl.uint32, "u32", []),                # same bits: only the dtype changes
    ("fp32", tl.float16, "fp16", ["truncf"]),
    ("fp16", tl.float32, "fp32", ["extf"]),
    ("fp16", tl.bfloat16, "bf16", ["extf", "truncf"]),  # through fp32, as Triton
    ("fp16", tl.float64, "fp64", ["extf", "extf"]),
    ("fp32", tl.int32, "i32", ["fptosi"]),
    ("fp32", tl.uint8, "u8", ["fptoui"]),
    ("u32", tl.float32, "fp32", ["uitofp"]),
    ("i32", tl.float32, "fp32", ["sitofp"]),
    ("i1", tl.float32, "fp32", ["uitofp"]),
    ("i32", tl.int1, "i8", ["constant", "cmpi", "extui"]),  # bool is `x != 0`
    ("fp32", tl.int1, "i8", ["constant", "cmpf", "extui"]),
])
def test_cast_ops(src, dst, dst_sig, expected):
    assert cast_ops(src, dst, dst_sig) == expected


def test_bitcast_reinterprets_bits():
    assert cast_ops("fp32", tl.int32, "i32", bitcast=True) == ["bitcast"]
    with pytest.raises(CompilationError, match="cannot bitcast"):
        cast_ops("fp32", tl.int16, "i16", bitcast=True)


def test_bool_pointer_is_accessed_as_int8():
    module = build_module(cast_kernel, {"src_ptr": "*i1", "dst_ptr": "*i1"},
                          {"DST": tl.int1, "BITCAST": False})
    text = str(module)
    assert "load" in text and "-> i8" in text and "ptr<i8>" in text
    module.verify()


@pytest.mark.parametrize("value,expected", [
    (True, tl.int1), (7, tl.int32), (-2 ** 31, tl.int32), (2 ** 31, tl.uint32),
    (2 ** 32, tl.int64), (-2 ** 40, tl.int64), (2 ** 63, tl.uint64), (1.5, tl.float32),
    (0.0, tl.float32), (1e-300, tl.float64), (1e300, tl.float64), (float("inf"), tl.float32),
])
def test_literal_types(value, expected):
    assert to_tensor_type(value) == expected


@pytest.mark.parametrize("a,b,expected", [
    ([16], [], [16]), ([16, 1], [1, 32], [16, 32]), ([32], [16, 1], [16, 32]),
    ([3, 4], [5, 3, 4], [5, 3, 4]), ([1], [8, 4], [8, 4]),
])
def test_broadcast_shapes(a, b, expected):
    assert broadcast_shapes(a, b) == expected


def test_broadcast_shape_mismatch():
    with pytest.raises(ValueError, match="incompatible dimensions"):
        broadcast_shapes([16], [32])


def outer_kernel(x_ptr, y_ptr, M: tl.constexpr, N: tl.constexpr):
    rows = tl.load(x_ptr + tl.arange(0, M))
    cols = tl.load(y_ptr + tl.arange(0, N))
    tile = rows[:, None] * cols[None, :]
    tl.static_assert(tile.shape == [M, N])
    tl.static_assert(rows[None].shape == [1, M])
    mixed = tile + cols  # rank 1 against rank 2: left-pad with a size-1 dim
    tl.static_assert(mixed.shape == [M, N])
    tl.static_assert(tl.expand_dims(rows, 0).shape == [1, M])
    tl.static_assert(tl.broadcast_to(rows[:, None], M, N).shape == [M, N])
    tl.static_assert(tl.reshape(tile, [M * N]).shape == [M * N])


def test_indexing_and_broadcasting_shapes():
    module = build_module(outer_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32"}, {"M": 8, "N": 4})
    module.verify()
    expands = [op for op in module.functions()[0].body(0).operations if op.name == "expand_dims"]
    assert [op.attrs["axis"] for op in expands][:2] == [1, 0]
    assert str(expands[0].result(0).type) == "tensor<8x1xf32>"
