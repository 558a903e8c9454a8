"""Type rules of the math functions and the atomics, against Triton's (math.py, semantic.py).

Expected dtypes and errors are written out by hand from Triton's rules: float functions keep
the input dtype and compute fp16/bf16 in fp32; integers are rejected; fdiv and sigmoid of
fp16 give fp32 (the division); atomics take 32/64-bit types, fp16/bf16 only for add, floats
for max/min through integer ops on the bits. Each case compiles a kernel and reads the IR.
"""
import pytest

import tessera.language as tl
from tessera.errors import CompilationError
from tessera.frontend import build_module

SIG = {tl.int8: "i8", tl.int32: "i32", tl.int64: "i64", tl.uint32: "u32", tl.uint64: "u64",
       tl.float16: "fp16", tl.bfloat16: "bf16", tl.float32: "fp32", tl.float64: "fp64",
       tl.float8e4nv: "fp8e4nv"}
FLOATS = [tl.float16, tl.bfloat16, tl.float32, tl.float64]


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


def ops_of(module, name):
    found = []

    def walk(block):
        for op in block.operations:
            if op.name == name:
                found.append(op)
            for i in range(op.num_regions):
                walk(op.body(i))

    for func in module.functions():
        walk(func.body(0))
    return found


def unary_kernel(x_ptr, NAME: tl.constexpr, EXPECTED: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    y = getattr(tl, NAME)(x)
    tl.static_assert(y.dtype == EXPECTED, "unexpected result dtype")


def math_namespace_kernel(x_ptr, NAME: tl.constexpr, EXPECTED: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    y = getattr(tl.math, NAME)(x)
    tl.static_assert(y.dtype == EXPECTED, "unexpected result dtype")


def compile_unary(name, dtype, expected=None, kernel=unary_kernel):
    return build_module(kernel, {"x_ptr": "*" + SIG[dtype]},
                        {"NAME": name, "EXPECTED": expected or dtype})


UNARY_OPS = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sqrt": "sqrt",
             "rsqrt": "rsqrt", "sin": "sin", "cos": "cos", "erf": "erf", "floor": "floor",
             "ceil": "ceil"}


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY_OPS))
def test_float_functions_keep_the_dtype_and_compute_narrow_types_in_fp32(name, dtype):
    names = op_names(compile_unary(name, dtype))
    assert UNARY_OPS[name] in names
    narrow = dtype in (tl.float16, tl.bfloat16)
    assert ("extf" in names and "truncf" in names) == narrow, names


def test_tanh_lives_in_the_math_namespace():
    names = op_names(compile_unary("tanh", tl.bfloat16, kernel=math_namespace_kernel))
    assert names.index("extf") < names.index("tanh") < names.index("truncf")
    assert not hasattr(tl, "tanh")  # as Triton: tl.math.tanh (libdevice), no tl.tanh


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "sin", "erf", "floor", "sqrt_rn"])
@pytest.mark.parametrize("dtype", [tl.int32, tl.uint32, tl.float8e4nv], ids=str)
def test_float_functions_reject_other_types(name, dtype):
    with pytest.raises(CompilationError, match=f"{name} expects dtype"):
        compile_unary(name, dtype)


@pytest.mark.parametrize("dtype", [tl.float16, tl.bfloat16], ids=str)
def test_precise_sqrt_takes_fp32_and_fp64_only(dtype):
    with pytest.raises(CompilationError, match="sqrt_rn expects dtype fp32 or fp64"):
        compile_unary("sqrt_rn", dtype)
    assert "precise_sqrt" in op_names(compile_unary("sqrt_rn", tl.float64))


@pytest.mark.parametrize("dtype,op", [(tl.float32, "absf"), (tl.float16, "absf"),
                                      (tl.int32, "absi"), (tl.int8, "absi")], ids=str)
def test_abs(dtype, op):
    names = op_names(compile_unary("abs", dtype))
    assert op in names and "extf" not in names


def test_abs_of_unsigned_is_the_value_and_of_fp8_clears_the_sign_bit():
    assert not {"absi", "absf"} & set(op_names(compile_unary("abs", tl.uint32)))
    names = op_names(compile_unary("abs", tl.float8e4nv))
    assert names.count("bitcast") == 2 and "andi" in names


def binary_kernel(x_ptr, y_ptr, NAME: tl.constexpr, EXPECTED: tl.constexpr, FLAG: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    y = tl.load(y_ptr + tl.arange(0, 16))
    if NAME == "fdiv":
        z = tl.fdiv(x, y, ieee_rounding=FLAG)
    elif NAME == "fma":
        z = tl.fma(x, y, y)
    elif NAME == "clamp":
        z = tl.clamp(x, y, 1.0, propagate_nan=tl.PropagateNan.ALL if FLAG else
                     tl.PropagateNan.NONE)
    else:
        z = getattr(tl, NAME)(x, y)
    tl.static_assert(z.dtype == EXPECTED, "unexpected result dtype")


def compile_binary(name, a, b, expected, flag=False):
    return build_module(binary_kernel, {"x_ptr": "*" + SIG[a], "y_ptr": "*" + SIG[b]},
                        {"NAME": name, "EXPECTED": expected, "FLAG": flag})


def test_fdiv_is_fast_unless_ieee_rounding_and_fp16_gives_fp32():
    assert "fast_divf" in op_names(compile_binary("fdiv", tl.float32, tl.float32, tl.float32))
    names = op_names(compile_binary("fdiv", tl.float32, tl.float32, tl.float32, flag=True))
    assert "divf" in names and "fast_divf" not in names
    compile_binary("fdiv", tl.float16, tl.float16, tl.float32)
    with pytest.raises(CompilationError, match="fdiv needs floating-point operands"):
        compile_binary("fdiv", tl.int32, tl.int32, tl.float32)


def test_div_rn_and_umulhi():
    assert "divf" in op_names(compile_binary("div_rn", tl.float32, tl.float32, tl.float32))
    with pytest.raises(CompilationError, match="div_rn expects dtype"):
        compile_binary("div_rn", tl.float16, tl.float16, tl.float16)
    assert "mulhiui" in op_names(compile_binary("umulhi", tl.uint32, tl.uint32, tl.uint32))
    compile_binary("umulhi", tl.int64, tl.int64, tl.int64)
    with pytest.raises(CompilationError, match="umulhi expects dtype"):
        compile_binary("umulhi", tl.float32, tl.float32, tl.float32)


def test_fma_promotes_its_three_operands():
    module = compile_binary("fma", tl.float16, tl.float32, tl.float32)
    assert "fma" in op_names(module)
    names = op_names(compile_binary("fma", tl.bfloat16, tl.bfloat16, tl.bfloat16))
    assert names.index("extf") < names.index("fma") < names.index("truncf")
    with pytest.raises(CompilationError, match="fma expects dtype"):
        compile_binary("fma", tl.int32, tl.int32, tl.int32)


def test_clamp_is_max_then_min_and_floats_only():
    names = op_names(compile_binary("clamp", tl.float32, tl.float32, tl.float32))
    assert names.index("maxnumf") < names.index("minnumf")
    names = op_names(compile_binary("clamp", tl.float32, tl.float32, tl.float32, flag=True))
    assert names.index("maximumf") < names.index("minimumf")
    with pytest.raises(CompilationError, match="clamp only supports floating-point"):
        compile_binary("clamp", tl.int32, tl.int32, tl.int32)


@pytest.mark.parametrize("dtype,expected", [(tl.float32, tl.float32), (tl.float16, tl.float32),
                                            (tl.float64, tl.float64)], ids=str)
def test_sigmoid_is_one_over_one_plus_exp_minus_x(dtype, expected):
    names = op_names(compile_unary("sigmoid", dtype, expected))
    assert ["negf", "exp"] == [n for n in names if n in ("negf", "exp")]
    # Triton's "/" : div.full.f32 in fp32, correctly rounded in fp64.
    assert ("divf" if expected == tl.float64 else "fast_divf") in names


def method_kernel(x_ptr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    tl.static_assert(x.exp().dtype == tl.float32, "")
    tl.static_assert(x.sqrt().dtype == tl.float32, "")
    tl.static_assert(tl.softmax(x).dtype == tl.float32, "")


def test_tensor_methods_and_softmax():
    names = op_names(build_module(method_kernel, {"x_ptr": "*fp32"}, {}))
    assert {"exp", "sqrt", "reduce", "fast_divf"} <= set(names)


# --- atomics ---------------------------------------------------------------------------------

def atomic_kernel(p_ptr, v_ptr, OP: tl.constexpr, SEM: tl.constexpr, SCOPE: tl.constexpr,
                  MASKED: tl.constexpr):
    offs = tl.arange(0, 16)
    v = tl.load(v_ptr + offs)
    mask = offs < 10 if MASKED else None
    if OP == "cas":
        old = tl.atomic_cas(p_ptr + offs, v, v, sem=SEM, scope=SCOPE)
    else:
        old = getattr(tl, "atomic_" + OP)(p_ptr + offs, v, mask=mask, sem=SEM, scope=SCOPE)
    tl.static_assert(old.dtype == p_ptr.dtype.element_ty, "old values have the pointee type")


def compile_atomic(op, pointee, value=None, sem=None, scope=None, masked=True):
    return build_module(atomic_kernel, {"p_ptr": "*" + SIG[pointee],
                                        "v_ptr": "*" + SIG[value or pointee]},
                        {"OP": op, "SEM": sem, "SCOPE": scope, "MASKED": masked})


@pytest.mark.parametrize("op,pointee,kind", [
    ("add", tl.int32, "add"), ("add", tl.uint64, "add"), ("add", tl.float32, "fadd"),
    ("add", tl.float16, "fadd"), ("add", tl.bfloat16, "fadd"), ("add", tl.float64, "fadd"),
    ("max", tl.int32, "max"), ("max", tl.uint32, "umax"), ("min", tl.int64, "min"),
    ("min", tl.uint64, "umin"), ("and", tl.int32, "and"), ("or", tl.uint32, "or"),
    ("xor", tl.int64, "xor"), ("xchg", tl.float32, "xchg"), ("xchg", tl.int32, "xchg")],
    ids=lambda v: str(v))
def test_atomic_kinds(op, pointee, kind):
    module = compile_atomic(op, pointee)  # keeps the ops alive
    (rmw,) = ops_of(module, "atomic_rmw")
    assert rmw.attrs["kind"] == kind
    assert (rmw.attrs["sem"], rmw.attrs["scope"]) == ("acq_rel", "gpu")  # Triton's defaults
    assert len(rmw.operands) == 3  # pointer, value, mask


@pytest.mark.parametrize("op,kinds", [("max", ["max", "umin"]), ("min", ["min", "umax"])])
def test_float_max_min_work_on_the_bits(op, kinds):
    module = compile_atomic(op, tl.float32)
    assert [r.attrs["kind"] for r in ops_of(module, "atomic_rmw")] == kinds
    assert op_names(module).count("bitcast") >= 3  # value, pointer, result


def test_sem_scope_mask_and_value_conversion():
    module = compile_atomic("add", tl.float32, tl.float16, sem="relaxed", scope="cta",
                            masked=False)
    (rmw,) = ops_of(module, "atomic_rmw")
    assert (rmw.attrs["sem"], rmw.attrs["scope"]) == ("relaxed", "cta")
    assert len(rmw.operands) == 2
    module = compile_atomic("cas", tl.int64, sem="acquire", scope="sys")
    (cas,) = ops_of(module, "atomic_cas")
    assert (cas.attrs["sem"], cas.attrs["scope"]) == ("acquire", "sys")


@pytest.mark.parametrize("op,pointee,message", [
    ("max", tl.float16, "atomic_max does not support fp16"),
    ("xchg", tl.bfloat16, "atomic_xchg does not support bf16"),
    ("add", tl.int8, "atomic_add does not support int8"),
    ("and", tl.float32, "atomic_and needs integers"),
    ("max", tl.float8e4nv, "atomic_max does not support fp8e4nv"),
    ("cas", tl.int8, "atomic_cas supports 16, 32 and 64-bit elements")], ids=str)
def test_atomic_type_errors(op, pointee, message):
    with pytest.raises(CompilationError, match=message):
        compile_atomic(op, pointee)


@pytest.mark.parametrize("sem,scope,message", [("seq_cst", None, "sem must be one of"),
                                               (None, "cluster", "scope must be one of")])
def test_atomic_sem_and_scope_errors(sem, scope, message):
    with pytest.raises(CompilationError, match=message):
        compile_atomic("add", tl.int32, sem=sem, scope=scope)
