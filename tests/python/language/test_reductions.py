"""Type and shape rules of the reductions and scans, checked against Triton's.

Expected dtypes are written out by hand from Triton's standard.py (sum: integers narrower than
32 bits widen to 32 bits of their signedness, floats keep their type; max/min: bf16 in fp32,
and without return_indices anything narrower than 32 bits in fp32/int32; cumsum/cumprod: bf16
in fp32), not computed. Each case compiles a kernel whose tl.static_assert holds only if the
front end followed the rule; others check the IR (one reduce per axis, combiner regions) and
the errors.
"""
import re

import pytest
import tessera
import tessera.language as tl
from tessera.errors import CompilationError
from tessera.frontend import build_module

SIG = {tl.int1: "i1", tl.int8: "i8", tl.int16: "i16", tl.int32: "i32", tl.int64: "i64",
       tl.uint8: "u8", tl.uint16: "u16", tl.uint32: "u32", tl.float16: "fp16",
       tl.bfloat16: "bf16", tl.float32: "fp32", tl.float64: "fp64"}


def reduction_kernel(x_ptr, OP: tl.constexpr, DTYPE: tl.constexpr, VALUES: tl.constexpr,
                     INDICES: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 4)[:, None] * 8 + tl.arange(0, 8)[None, :])
    if OP == "sum":
        r = tl.sum(x, axis=1)
    elif OP == "sum_dtype":
        r = tl.sum(x, axis=1, dtype=DTYPE)
    elif OP == "max":
        r = tl.max(x, axis=1)
    elif OP == "min":
        r = tl.min(x, axis=0)
    elif OP == "cumsum":
        r = tl.cumsum(x, axis=1)
    elif OP == "cumprod":
        r = tl.cumprod(x, axis=0)
    elif OP == "xor_sum":
        r = tl.xor_sum(x, axis=1)
    elif OP == "max_indices":
        r, i = tl.max(x, axis=1, return_indices=True)
        tl.static_assert(i.dtype == INDICES, "index dtype")
    else:
        r = tl.argmin(x, axis=1)
    tl.static_assert(r.dtype == VALUES, "reduced to another dtype")


CASES = [
    ("sum", tl.int8, tl.int32), ("sum", tl.int16, tl.int32), ("sum", tl.uint8, tl.uint32),
    ("sum", tl.uint16, tl.uint32), ("sum", tl.int1, tl.uint32), ("sum", tl.int32, tl.int32),
    ("sum", tl.int64, tl.int64), ("sum", tl.uint32, tl.uint32), ("sum", tl.float16, tl.float16),
    ("sum", tl.bfloat16, tl.bfloat16), ("sum", tl.float32, tl.float32),
    ("sum", tl.float64, tl.float64),
    ("max", tl.float16, tl.float32), ("max", tl.bfloat16, tl.float32),
    ("max", tl.float32, tl.float32), ("max", tl.int8, tl.int32), ("max", tl.uint16, tl.int32),
    ("max", tl.int64, tl.int64), ("min", tl.float16, tl.float32), ("min", tl.int16, tl.int32),
    ("cumsum", tl.bfloat16, tl.float32), ("cumsum", tl.int8, tl.int32),
    ("cumsum", tl.float16, tl.float16), ("cumsum", tl.uint8, tl.uint32),
    ("cumprod", tl.bfloat16, tl.float32), ("cumprod", tl.float16, tl.float16),
    ("cumprod", tl.int8, tl.int8), ("xor_sum", tl.int16, tl.int16),
    ("argmin", tl.float16, tl.int32), ("argmin", tl.uint8, tl.int32),
]


@pytest.mark.parametrize("op, element, expected", CASES,
                         ids=[f"{op}-{e}" for op, e, _ in CASES])
def test_result_dtype(op, element, expected):
    build_module(reduction_kernel, {"x_ptr": "*" + SIG[element]},
                 {"OP": op, "DTYPE": None, "VALUES": expected, "INDICES": None})


@pytest.mark.parametrize("element, values", [(tl.float16, tl.float16),
                                             (tl.bfloat16, tl.float32), (tl.int8, tl.int8)])
def test_max_with_indices_keeps_the_value_dtype(element, values):
    # With return_indices only bf16 is promoted: the values keep fp16 and int8.
    build_module(reduction_kernel, {"x_ptr": "*" + SIG[element]},
                 {"OP": "max_indices", "DTYPE": None, "VALUES": values, "INDICES": tl.int32})


@pytest.mark.parametrize("element, dtype", [(tl.float16, tl.float32), (tl.int8, tl.int64),
                                            (tl.int32, tl.float32)])
def test_sum_accumulates_in_the_given_dtype(element, dtype):
    module = build_module(reduction_kernel, {"x_ptr": "*" + SIG[element]},
                          {"OP": "sum_dtype", "DTYPE": dtype, "VALUES": dtype, "INDICES": None})
    (reduce,) = reduce_ops(module)
    assert str(reduce.operands[0].type) == f"tensor<4x8x{dtype.to_ir()}>"


def reduce_ops(module, name="reduce"):
    found = []

    def visit(block):
        for op in block.operations:
            if op.name == name:
                found.append(op)
            for region in range(op.num_regions):
                visit(op.body(region))

    for func in module.functions():
        visit(func.body(0))
    return found


def shapes_kernel(x_ptr, AXIS: tl.constexpr, KEEP: tl.constexpr, SHAPE: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 2)[:, None, None] * 32 + tl.arange(0, 4)[None, :, None] * 8
                + tl.arange(0, 8)[None, None, :])
    r = tl.sum(x, axis=AXIS, keep_dims=KEEP)
    tl.static_assert(r.shape == SHAPE, "reduced to another shape")
    m = x.max(AXIS, keep_dims=KEEP)  # the tensor method
    tl.static_assert(m.shape == SHAPE, "the method reduced to another shape")


@pytest.mark.parametrize("axis, keep, shape, reduces", [
    (0, False, [4, 8], 1), (1, False, [2, 8], 1), (2, False, [2, 4], 1), (-1, False, [2, 4], 1),
    (1, True, [2, 1, 8], 1), (None, False, [], 3), (None, True, [1, 1, 1], 3)])
def test_result_shapes(axis, keep, shape, reduces):
    module = build_module(shapes_kernel, {"x_ptr": "*fp32"},
                          {"AXIS": axis, "KEEP": keep, "SHAPE": shape})
    ops = reduce_ops(module)
    assert len(ops) == 2 * reduces  # axis=None: one reduce per axis, innermost first
    if axis is None:
        assert [op.attrs["axis"] for op in ops[:3]] == [2, 1, 0]


@tessera.jit
def pair_add(a0, a1, b0, b1):
    return a0 + b0, a1 + b1


@tessera.jit
def bad_type(a, b):
    return (a + b).to(tl.float16)


@tessera.jit
def mul(a, b):
    return a * b


@tessera.jit
def first_only(a0, a1, b0, b1):
    return a0 + b0


def user_kernel(x_ptr, FN: tl.constexpr, TUPLE: tl.constexpr, SCAN: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    if SCAN:
        r = tl.associative_scan(x, 0, FN, reverse=True)
        tl.static_assert(r.shape == [16], "scan keeps the shape")
    elif TUPLE:
        s, c = tl.reduce((x, x * x), 0, FN)
        tl.static_assert(s.dtype == tl.float32 and c.shape == [], "tuple reduce")
    else:
        r = tl.reduce(x, 0, FN, keep_dims=True)
        tl.static_assert(r.shape == [1], "keep_dims")


def test_user_combine_functions_become_combiner_regions():
    module = build_module(user_kernel, {"x_ptr": "*fp32"},
                          {"FN": pair_add, "TUPLE": True, "SCAN": False})
    (reduce,) = reduce_ops(module)
    region = reduce.body(0)
    assert [str(a.type) for a in region.arguments] == ["f32"] * 4
    assert [op.name for op in region.operations] == ["addf", "addf", "yield"]
    module = build_module(user_kernel, {"x_ptr": "*fp32"}, {"FN": mul, "TUPLE": False,
                                                             "SCAN": True})
    (scan,) = reduce_ops(module, "scan")
    assert scan.attrs == {"axis": 0, "reverse": True}
    assert [op.name for op in scan.body(0).operations] == ["mulf", "yield"]


@pytest.mark.parametrize("fn, tuple_input, message", [
    (bad_type, False, "combine_fn must return a fp32 scalar for input 0, got fp16[]"),
    (pair_add, False, "pair_add(): missing a required argument: 'b0'"),
    (mul, True, "mul(): too many positional arguments"),
    (first_only, True, "combine_fn must return 2 value(s), one per input, got 1"),
    (max, False, "combine_fn must be a @tessera.jit function"),
])
def test_combine_function_errors(fn, tuple_input, message):
    with pytest.raises(CompilationError, match=re.escape(message)):
        build_module(user_kernel, {"x_ptr": "*fp32"},
                     {"FN": fn, "TUPLE": tuple_input, "SCAN": False})


def error_kernel(x_ptr, CASE: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    if CASE == "axis":
        tl.sum(x, axis=1)
    elif CASE == "scalar":
        tl.sum(tl.load(x_ptr), axis=0)
    elif CASE == "xor_float":
        tl.xor_sum(x, 0)
    elif CASE == "pointers":
        tl.max(x_ptr + tl.arange(0, 16), 0)
    else:
        tl.cumsum(x, axis=None)


@pytest.mark.parametrize("case, message", [
    ("axis", "reduce axis 1 is out of range for a tensor of rank 1"),
    ("scalar", r"reduce needs tensors \(tiles\), got fp32\[\]"),
    ("xor_float", "xor_sum needs integers"),
    ("pointers", "of pointers"),
    ("scan_axis", "associative_scan's axis must be a constexpr int, got None"),
])
def test_errors_name_the_rule(case, message):
    with pytest.raises(CompilationError, match=message):
        build_module(error_kernel, {"x_ptr": "*fp32"}, {"CASE": case})


def test_builtins_need_a_kernel():
    with pytest.raises(RuntimeError, match="only be called inside a @tessera.jit function"):
        tl.sum(None)
