"""Type promotion of binary operators, checked against Triton's documented rules.

Expected dtypes are written out by hand from Triton's semantics page and semantic.py
(computation_type_impl, integer_promote_impl), not computed. Each case compiles a small kernel
whose ``tl.static_assert(c.dtype == EXPECTED)`` holds only if the front end promoted as Triton
does; a few cases also check the IR op that was chosen (signed vs unsigned, int vs float).
"""
import re

import pytest

import tessera.language as tl
from tessera.errors import CompilationError
from tessera.frontend import build_module

SIG = {tl.int1: "i1", tl.int8: "i8", tl.int16: "i16", tl.int32: "i32", tl.int64: "i64",
       tl.uint8: "u8", tl.uint16: "u16", tl.uint32: "u32", tl.uint64: "u64",
       tl.float16: "fp16", tl.bfloat16: "bf16", tl.float32: "fp32", tl.float64: "fp64",
       tl.float8e4nv: "fp8e4nv", tl.float8e5: "fp8e5"}


def binary_kernel(a_ptr, b_ptr, OP: tl.constexpr, EXPECTED: tl.constexpr):
    a = tl.load(a_ptr + tl.arange(0, 16))
    b = tl.load(b_ptr + tl.arange(0, 16))
    if OP == "+":
        c = a + b
    elif OP == "*":
        c = a * b
    elif OP == "/":
        c = a / b
    elif OP == "//":
        c = a // b
    elif OP == "%":
        c = a % b
    elif OP == "<":
        c = a < b
    else:
        c = tl.where(a > 0, a, b)
    tl.static_assert(c.dtype == EXPECTED, "promoted to another dtype")


def scalar_kernel(a_ptr, OP: tl.constexpr, SCALAR: tl.constexpr, EXPECTED: tl.constexpr):
    a = tl.load(a_ptr + tl.arange(0, 16))
    if OP == "+":
        c = a + SCALAR
    elif OP == "*":
        c = SCALAR * a
    elif OP == "/":
        c = a / SCALAR
    else:
        c = a & SCALAR
    tl.static_assert(c.dtype == EXPECTED, "promoted to another dtype")


def compile_binary(op, a, b, expected):
    return build_module(binary_kernel, {"a_ptr": "*" + SIG[a], "b_ptr": "*" + SIG[b]},
                        {"OP": op, "EXPECTED": expected})


def op_names(module):
    names = []

    def walk(block):
        for op in block.operations:
            names.append(op.name)
            for i in range(op.num_regions):
                walk(op.body(i))

    for func in module.functions():
        walk(func.body(0))
    return names


TENSOR_TENSOR = [  # (a, b, a + b), Triton's kind / width / prefer-fp16 / prefer-unsigned rules
    (tl.int8, tl.int32, tl.int32),
    (tl.int32, tl.int8, tl.int32),
    (tl.uint8, tl.int16, tl.int16),
    (tl.int16, tl.uint16, tl.uint16),
    (tl.int32, tl.uint32, tl.uint32),
    (tl.uint32, tl.int64, tl.int64),
    (tl.uint64, tl.int64, tl.uint64),
    (tl.int1, tl.int1, tl.int1),
    (tl.int1, tl.int8, tl.int8),
    (tl.int32, tl.float16, tl.float16),
    (tl.int64, tl.bfloat16, tl.float32),
    (tl.float16, tl.float32, tl.float32),
    (tl.bfloat16, tl.float16, tl.float16),
    (tl.bfloat16, tl.bfloat16, tl.bfloat16),
    (tl.float32, tl.float64, tl.float64),
    (tl.float8e4nv, tl.float8e5, tl.float16),
    (tl.float8e4nv, tl.float8e4nv, tl.float8e4nv),
    (tl.float8e5, tl.float16, tl.float16),
]


@pytest.mark.parametrize("a,b,expected", TENSOR_TENSOR)
def test_add_promotes_as_triton(a, b, expected):
    compile_binary("+", a, b, expected).verify()


@pytest.mark.parametrize("a,b,expected", [(tl.int8, tl.int32, tl.int32),
                                          (tl.float16, tl.bfloat16, tl.float16)])
def test_mul_and_where_promote_like_add(a, b, expected):
    compile_binary("*", a, b, expected)
    compile_binary("where", a, b, expected)


DIVISION = [  # (op, a, b, result)
    ("/", tl.int32, tl.int32, tl.float32),      # int / int is fp32
    ("/", tl.int64, tl.int64, tl.float32),
    ("/", tl.float16, tl.float16, tl.float32),  # no native fp16 division
    ("/", tl.bfloat16, tl.bfloat16, tl.float32),
    ("/", tl.float16, tl.int32, tl.float32),
    ("/", tl.float64, tl.int32, tl.float64),
    ("//", tl.int8, tl.int8, tl.int8),
    ("//", tl.int16, tl.int32, tl.int32),
    ("//", tl.uint32, tl.uint32, tl.uint32),
    ("%", tl.float16, tl.float16, tl.float32),
    ("%", tl.int32, tl.int64, tl.int64),
    ("<", tl.uint32, tl.int32, tl.int1),
]


@pytest.mark.parametrize("op,a,b,expected", DIVISION)
def test_division_and_comparison_types(op, a, b, expected):
    compile_binary(op, a, b, expected).verify()


@pytest.mark.parametrize("op,a,b,ir_op", [
    ("//", tl.int32, tl.int32, "divsi"), ("//", tl.uint32, tl.uint32, "divui"),
    ("%", tl.int8, tl.int8, "remsi"), ("%", tl.uint16, tl.uint16, "remui"),
    ("%", tl.float32, tl.float32, "remf"), ("/", tl.int32, tl.int32, "fast_divf"),
    ("/", tl.float16, tl.float16, "fast_divf"), ("/", tl.float64, tl.float32, "divf"),
    ("<", tl.int32, tl.int32, "cmpi"), ("<", tl.float16, tl.float32, "cmpf"),
])
def test_division_ops(op, a, b, ir_op):
    names = op_names(compile_binary(op, a, b, tl.int1 if op == "<" else
                                    {"fast_divf": tl.float32, "remf": tl.float32,
                                     "divf": tl.float64}.get(ir_op, a)))
    # "/" is Triton's: div.full.f32 (fast_divf) in fp32, fp16 and bf16 computed in fp32;
    # correctly rounded (divf) in fp64.
    assert ir_op in names and (ir_op != "fast_divf" or "divf" not in names)


def test_int_div_int_converts_both_operands_to_fp32():
    names = op_names(compile_binary("/", tl.int32, tl.int32, tl.float32))
    assert names.count("sitofp") == 2 and "fast_divf" in names


def test_unsigned_comparison_uses_unsigned_predicate():
    module = compile_binary("<", tl.uint32, tl.int32, tl.int1)
    cmp = [op for op in module.functions()[0].body(0).operations if op.name == "cmpi"]
    assert cmp[0].attrs["predicate"] == "ult"


@pytest.mark.parametrize("op,a,b", [("//", tl.uint32, tl.int32), ("%", tl.int8, tl.uint8),
                                    ("/", tl.uint16, tl.int16), ("//", tl.float32, tl.float32)])
def test_mixed_signedness_division_is_an_error(op, a, b):
    with pytest.raises(CompilationError) as info:
        compile_binary(op, a, b, tl.int32)
    assert "binary_kernel" in str(info.value)
    if a.is_int():  # Triton's wording, which its tests match: "Cannot use ... signedness"
        assert re.search("Cannot use .* because they have different signedness", str(info.value))


SCALARS = [  # (tensor dtype, op, Python scalar, result): a scalar of a lower or equal kind
    (tl.uint8, "+", 3, tl.uint8),            # does not take part in the promotion
    (tl.int64, "+", 5, tl.int64),
    (tl.float16, "*", 2.0, tl.float16),
    (tl.bfloat16, "+", 2, tl.bfloat16),
    (tl.float16, "/", 2, tl.float32),        # fp16 division still goes through fp32
    (tl.int16, "+", 4.0, tl.float32),        # a float scalar lifts an int tensor to fp32
    (tl.int1, "+", 3, tl.int32),             # an int scalar lifts a bool tensor to int32
    (tl.int1, "&", True, tl.int1),
    (tl.float32, "+", 2 ** 40, tl.float32),
    (tl.int32, "/", 2, tl.float32),
]


@pytest.mark.parametrize("a,op,scalar,expected", SCALARS)
def test_python_scalars_are_weakly_typed(a, op, scalar, expected):
    build_module(scalar_kernel, {"a_ptr": "*" + SIG[a]},
                 {"OP": op, "SCALAR": scalar, "EXPECTED": expected}).verify()


@pytest.mark.parametrize("a,scalar,text", [(tl.int8, 300, "out of range"),
                                           (tl.int32, 2 ** 33, "out of range"),
                                           (tl.uint32, -1, "negative")])
def test_scalars_out_of_range_are_errors(a, scalar, text):
    with pytest.raises(CompilationError, match=text):
        build_module(scalar_kernel, {"a_ptr": "*" + SIG[a]},
                     {"OP": "+", "SCALAR": scalar, "EXPECTED": a})


def shift_kernel(a_ptr, RIGHT: tl.constexpr):
    a = tl.load(a_ptr)
    if RIGHT:
        tl.store(a_ptr, a >> 1)
    else:
        tl.store(a_ptr, a << 1)


@pytest.mark.parametrize("sig,right,ir_op", [("*i8", True, "shrsi"), ("*u8", True, "shrui"),
                                             ("*u32", False, "shli")])
def test_shift_right_follows_signedness(sig, right, ir_op):
    assert ir_op in op_names(build_module(shift_kernel, {"a_ptr": sig}, {"RIGHT": right}))


def assigned_literal_kernel(a_ptr, EXPECTED: tl.constexpr):
    a = tl.load(a_ptr)
    two = 2  # a plain assignment makes an int32 runtime scalar (Triton), no longer weak
    two_k: tl.constexpr = 2  # an annotated one stays a compile-time value
    tl.static_assert((a * two).dtype == EXPECTED)
    tl.static_assert((a * two_k).dtype == tl.int8)


def test_assigned_literals_are_int32_values_as_in_triton():
    build_module(assigned_literal_kernel, {"a_ptr": "*i8"}, {"EXPECTED": tl.int32}).verify()
