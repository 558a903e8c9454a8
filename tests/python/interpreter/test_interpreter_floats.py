# Float semantics against exact rational arithmetic (fractions.Fraction rounded by hand):
# f16 / bf16 / fp8 arithmetic rounded once, conversions without double rounding, saturating
# float -> int, NaN rules of max/min and compares, sign-exact negation.
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from interpreter_ir import NP_DTYPES, round_exact, run_elementwise

NARROW = ["f16", "bf16"]


def assert_same_floats(actual, expected):
    """Bit-exact, except that any NaN matches any NaN."""
    actual = np.asarray(actual).astype(np.float64)
    expected = np.asarray(expected).astype(np.float64)
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(actual), nan)
    np.testing.assert_array_equal(actual[~nan], expected[~nan])
    np.testing.assert_array_equal(np.signbit(actual[~nan]), np.signbit(expected[~nan]))


def random_floats(rng, name: str, n: int):
    """Magnitudes across the whole range of the type (subnormals to overflow) plus specials."""
    dtype = NP_DTYPES[name]
    finfo = ml_dtypes.finfo(dtype) if name in ("bf16", "f8e4m3", "f8e5m2") else np.finfo(dtype)
    low, high = np.log2(float(finfo.smallest_subnormal)), np.log2(float(finfo.max))
    values = np.exp2(rng.uniform(low, high, n)) * rng.choice([-1.0, 1.0], n)
    values = values.astype(dtype)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, float(finfo.max)]
    values[:len(special)] = np.array(special).astype(dtype)
    rng.shuffle(values)
    return values


def exact_binary(name: str, a: float, b: float, result: str) -> float:
    if not (np.isfinite(a) and np.isfinite(b)) or (name == "divf" and b == 0):
        with np.errstate(all="ignore"):  # specials: exact in f64 as well
            f64 = {"addf": np.add, "subf": np.subtract, "mulf": np.multiply,
                   "divf": np.divide}[name](np.float64(a), np.float64(b))
        return float(f64)
    x, y = Fraction(a), Fraction(b)
    value = {"addf": x + y, "subf": x - y, "mulf": x * y, "divf": x / y if y else None}[name]
    rounded = round_exact(value, result, saturate=result.startswith("f8"))
    if rounded == 0 and value != 0:
        return -0.0 if value < 0 else 0.0
    if value == 0:  # exact zero: -0 only for (-0) + (-0) and the like
        return float(np.float64(a) + np.float64(b)) if name == "addf" else \
            float(np.float64(a) - np.float64(b)) if name == "subf" else \
            float(np.float64(a) * np.float64(b)) if name == "mulf" else \
            float(np.float64(a) / np.float64(b))
    return rounded


@pytest.mark.parametrize("result", NARROW + ["f32", "f8e4m3", "f8e5m2"])
@pytest.mark.parametrize("name", ["addf", "subf", "mulf", "divf"])
def test_float_arithmetic_rounds_once(rng, name, result):
    a = random_floats(rng, result, 300)
    b = random_floats(rng, result, 300)
    b[:30] = a[:30]  # cancellation and exact results
    expected = [exact_binary(name, float(x), float(y), result) for x, y in zip(a, b)]
    expected = np.array(expected, np.float64)
    if result.startswith("f8"):  # fp8 results saturate (PTX's cvt.rn.satfinite), inf included
        limit = 448.0 if result == "f8e4m3" else 57344.0
        expected = np.clip(expected, -limit, limit)
    assert_same_floats(run_elementwise(name, [a, b], result), expected)
    assert_same_floats(run_elementwise(name, [a[:16], b[:16]], result, scalar=True),
                       expected[:16])


@pytest.mark.parametrize("source", ["i32", "i64"])
@pytest.mark.parametrize("result", ["f16", "bf16", "f32", "f8e4m3", "f8e5m2"])
def test_int_to_float_rounds_once(rng, source, result):
    bits = 32 if source == "i32" else 64
    magnitudes = rng.integers(0, bits - 1, 400)
    values = [int(rng.integers(0, 2**int(m) + 1)) * (1 if rng.random() < 0.5 else -1)
              for m in magnitudes]
    # ints just above a bf16 midpoint: a round trip through f32 lands on the midpoint
    values[:4] = [2**24 + 2**16 + 1, -(2**24 + 2**16 + 1), 2**30 + 2**22 + 1, 3]
    a = np.array(values, NP_DTYPES[source])
    saturate = result.startswith("f8")
    expected = np.array([round_exact(Fraction(int(v)), result, saturate) for v in a])
    assert_same_floats(run_elementwise("sitofp", [a], result), expected)
    unsigned = np.array([round_exact(Fraction(int(v) % 2**bits), result, saturate) for v in a])
    assert_same_floats(run_elementwise("uitofp", [a], result), unsigned)


@pytest.mark.parametrize("source,result", [("f64", "bf16"), ("f64", "f16"), ("f32", "bf16"),
                                           ("f32", "f16"), ("f64", "f32"), ("f32", "f8e4m3"),
                                           ("f16", "f8e5m2"), ("bf16", "f8e4m3")])
def test_truncf_rounds_once(rng, source, result):
    a = random_floats(rng, source, 400)
    if source == "f64":  # just above a bf16 / f16 midpoint by less than an f32 ulp
        a[:2] = [1 + 2.0**-8 + 2.0**-30, 1 + 2.0**-11 + 2.0**-40]
    saturate = result.startswith("f8")
    expected = []
    for v in a.astype(np.float64):
        if np.isnan(v) or np.isinf(v):
            expected.append(float(np.clip(v, -448, 448)) if result == "f8e4m3" else
                            float(np.clip(v, -57344, 57344)) if result == "f8e5m2" else v)
        else:
            r = round_exact(Fraction(float(v)), result, saturate)
            expected.append(-0.0 if r == 0 and np.signbit(v) else r)
    assert_same_floats(run_elementwise("truncf", [a], result), np.array(expected))


def test_extf_is_exact(rng):
    a = random_floats(rng, "bf16", 300)
    assert_same_floats(run_elementwise("extf", [a], "f32"), a.astype(np.float32))
    h = random_floats(rng, "f16", 300)
    assert_same_floats(run_elementwise("extf", [h], "f64"), h.astype(np.float64))


@pytest.mark.parametrize("source", ["f32", "f16", "f64"])
@pytest.mark.parametrize("result", ["i8", "i32", "i64"])
def test_fptosi_truncates_and_saturates(rng, source, result):
    a = random_floats(rng, source, 300)
    with np.errstate(over="ignore"):  # 1e30 is inf in f16: that is the point
        a[:6] = np.array([2.5, -2.5, -0.9, 1e30, -1e30, np.nan]).astype(a.dtype)
    bits = np.dtype(NP_DTYPES[result]).itemsize * 8
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def expected_value(v):
        if np.isnan(v):
            return 0
        if np.isinf(v):
            return high if v > 0 else low
        return min(max(int(Fraction(float(v))), low), high)  # int() truncates toward zero

    expected = np.array([expected_value(v) for v in a], NP_DTYPES[result])
    np.testing.assert_array_equal(run_elementwise("fptosi", [a], result), expected)
    unsigned = [0 if np.isnan(v) or v < 0 else
                min(int(Fraction(float(v))) if np.isfinite(v) else 2**bits, 2**bits - 1)
                for v in a]
    unsigned = np.array(unsigned, np.uint64).astype(f"u{bits // 8}").view(NP_DTYPES[result])
    np.testing.assert_array_equal(run_elementwise("fptoui", [a], result), unsigned)


def test_float_to_int_at_the_i64_boundary():
    a = np.array([2.0**63, -(2.0**63), 2.0**63 - 1024, 2.0**64, -1.0], np.float64)
    np.testing.assert_array_equal(run_elementwise("fptosi", [a], "i64"),
                                  [2**63 - 1, -(2**63), 2**63 - 1024, 2**63 - 1, -1])
    expected = np.array([2**63, 0, 2**63 - 1024, 2**64 - 1, 0], np.uint64).view(np.int64)
    np.testing.assert_array_equal(run_elementwise("fptoui", [a], "i64"), expected)


NAN = np.nan


@pytest.mark.parametrize("name", ["maxnumf", "minnumf", "maximumf", "minimumf"])
@pytest.mark.parametrize("result", ["f32", "f16", "bf16"])
def test_max_min_nan_and_signed_zero(name, result):
    a = np.array([1.0, NAN, NAN, 0.0, -0.0, -3.0, 2.0, 0.0], NP_DTYPES[result])
    b = np.array([NAN, 1.0, NAN, -0.0, 0.0, -4.0, 2.0, 0.0], NP_DTYPES[result])
    if name == "maxnumf":
        expected = [1.0, 1.0, NAN, 0.0, 0.0, -3.0, 2.0, 0.0]
    elif name == "minnumf":
        expected = [1.0, 1.0, NAN, -0.0, -0.0, -4.0, 2.0, 0.0]
    elif name == "maximumf":
        expected = [NAN, NAN, NAN, 0.0, 0.0, -3.0, 2.0, 0.0]
    else:
        expected = [NAN, NAN, NAN, -0.0, -0.0, -4.0, 2.0, 0.0]
    assert_same_floats(run_elementwise(name, [a, b], result), np.array(expected))
    assert_same_floats(run_elementwise(name, [a, b], result, scalar=True), np.array(expected))


@pytest.mark.parametrize("predicate", ["oeq", "one", "olt", "ole", "ogt", "oge", "ueq", "une",
                                       "ult", "ule", "ugt", "uge", "ord", "uno"])
@pytest.mark.parametrize("result", ["f32", "bf16"])
def test_cmpf_ordered_and_unordered(predicate, result):
    a = np.array([1.0, 1.0, 2.0, NAN, 1.0, NAN, -0.0], NP_DTYPES[result])
    b = np.array([1.0, 2.0, 1.0, 1.0, NAN, NAN, 0.0], NP_DTYPES[result])
    expected = []
    for x, y in zip(a.astype(float), b.astype(float)):
        unordered = np.isnan(x) or np.isnan(y)
        relation = {"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y, "gt": x > y,
                    "ge": x >= y, "rd": True, "no": False}[predicate[1:]]
        if predicate[0] == "o" or predicate == "ord":
            expected.append(not unordered and relation)
        else:
            expected.append(unordered or relation if predicate != "uno" else unordered)
    np.testing.assert_array_equal(run_elementwise("cmpf", [a, b], "i1", predicate=predicate),
                                  np.array(expected))


def test_negf_flips_the_sign_bit_only():
    a = np.array([0.0, -0.0, 1.5, -np.inf, np.nan], np.float32)
    out = run_elementwise("negf", [a], "f32")
    np.testing.assert_array_equal(out.view(np.uint32), a.view(np.uint32) ^ 0x80000000)
    h = np.array([0.0, 3.0, -np.nan], ml_dtypes.bfloat16)
    out = run_elementwise("negf", [h], "bf16", scalar=True)
    np.testing.assert_array_equal(out.view(np.uint16), h.view(np.uint16) ^ 0x8000)


def test_remf_is_fmod(rng):
    a = random_floats(rng, "f32", 200)
    b = random_floats(rng, "f32", 200)
    with np.errstate(all="ignore"):
        expected = np.fmod(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    assert_same_floats(run_elementwise("remf", [a, b], "f32"), expected)
    h = random_floats(rng, "f16", 200)
    g = random_floats(rng, "f16", 200)
    with np.errstate(all="ignore"):
        expected = np.fmod(h.astype(np.float64), g.astype(np.float64))
    assert_same_floats(run_elementwise("remf", [h, g], "f16"), expected.astype(np.float16))


@pytest.mark.parametrize("name,value", [("f16", 0.1), ("bf16", 1 + 2.0**-8 + 2.0**-30),
                                        ("f8e4m3", 1000.0), ("f8e5m2", -1e9), ("f32", 1e-46),
                                        ("i8", 255), ("i16", -(2**15) - 1), ("i1", 3)])
def test_constants_round_once_or_wrap(name, value):
    from interpreter_ir import KernelBuilder, ptr, wrap
    from tessera import interpreter

    kb = KernelBuilder("constant", [ptr(name), ptr(name)])
    scalar_out, tensor_out = kb.args
    kb.store(scalar_out, kb.const(value, name))
    lanes = kb.range(0, 4)
    kb.store(kb.pointers(tensor_out, lanes), kb.const(value, kb.range(0, 4).type.with_element(
        scalar_out.type.pointee)))
    out, out4 = np.zeros(1, NP_DTYPES[name]), np.zeros(4, NP_DTYPES[name])
    interpreter.run(kb.finish(), (1,), [out, out4])
    if name.startswith("i"):
        bits = 1 if name == "i1" else int(name[1:])
        expected = bool(value & 1) if bits == 1 else wrap(value, bits)
    else:
        expected = round_exact(Fraction(value), name, saturate=name.startswith("f8"))
    assert_same_floats(out.astype(np.float64), np.array([float(expected)]))
    assert_same_floats(out4.astype(np.float64), np.full(4, float(expected)))
