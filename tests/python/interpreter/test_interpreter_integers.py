# Integer semantics against Python's unbounded ints wrapped by hand: two's-complement wrap,
# C division, unsigned ops, PTX-style clamped shifts, compares, i1 arithmetic, division by zero.
import numpy as np
import pytest
from interpreter_ir import KernelBuilder, T, ptr, run_elementwise, wrap
from tessera import interpreter
from tessera.interpreter import KernelRuntimeError

INT_TYPES = [np.int8, np.int16, np.int32, np.int64]


def random_ints(rng, dtype, n, nonzero=False):
    info = np.iinfo(dtype)
    values = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    special = np.array([0, 1, -1, info.min, info.max, info.min + 1], dtype)
    values[:len(special)] = special
    rng.shuffle(values)
    if nonzero:
        values[values == 0] = 3
    return values


def c_divide(a: int, b: int):
    q = abs(a) // abs(b)
    q = -q if (a < 0) != (b < 0) else q
    return q, a - b * q


def reference(name: str, a: int, b: int, bits: int) -> int:
    mask = (1 << bits) - 1
    ua, ub = a & mask, b & mask
    if name == "addi":
        return wrap(a + b, bits)
    if name == "subi":
        return wrap(a - b, bits)
    if name == "muli":
        return wrap(a * b, bits)
    if name in ("andi", "ori", "xori"):
        return wrap({"andi": ua & ub, "ori": ua | ub, "xori": ua ^ ub}[name], bits)
    if name == "divsi":
        return wrap(c_divide(a, b)[0], bits)
    if name == "remsi":
        return wrap(c_divide(a, b)[1], bits)
    if name == "divui":
        return wrap(ua // ub, bits)
    if name == "remui":
        return wrap(ua % ub, bits)
    if name == "shli":
        return wrap(ua << ub, bits) if ub < bits else 0
    if name == "shrui":
        return wrap(ua >> ub, bits) if ub < bits else 0
    if name == "shrsi":
        return a >> min(ub, bits - 1)
    if name in ("maxsi", "minsi"):
        return max(a, b) if name == "maxsi" else min(a, b)
    if name in ("maxui", "minui"):
        return wrap(max(ua, ub) if name == "maxui" else min(ua, ub), bits)
    raise AssertionError(name)


BINARY = ["addi", "subi", "muli", "andi", "ori", "xori", "divsi", "remsi", "divui", "remui",
          "shli", "shrui", "shrsi", "maxsi", "minsi", "maxui", "minui"]


@pytest.mark.parametrize("dtype", INT_TYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", BINARY)
def test_integer_binary_ops(rng, name, dtype):
    bits = np.dtype(dtype).itemsize * 8
    n = 200
    a = random_ints(rng, dtype, n)
    if name.startswith(("div", "rem")):
        b = random_ints(rng, dtype, n, nonzero=True)
        b[:4] = [-1, -1, 1, -1]
        a[:4] = [np.iinfo(dtype).min, 7, np.iinfo(dtype).min, -7]  # INT_MIN / -1 wraps
    elif name.startswith("sh"):
        b = rng.integers(0, 2 * bits, n).astype(dtype)  # half of them >= the width
        b[:2] = [-1, np.iinfo(dtype).min]  # huge unsigned amounts
    else:
        b = random_ints(rng, dtype, n)
    expected = np.array([reference(name, int(x), int(y), bits) for x, y in zip(a, b)], dtype)
    ir_type = {8: "i8", 16: "i16", 32: "i32", 64: "i64"}[bits]
    np.testing.assert_array_equal(run_elementwise(name, [a, b], ir_type), expected)
    # the scalar path (NumPy scalars instead of arrays) must agree
    k = 24
    np.testing.assert_array_equal(run_elementwise(name, [a[:k], b[:k]], ir_type, scalar=True),
                                  expected[:k])


@pytest.mark.parametrize("predicate", ["eq", "ne", "slt", "sle", "sgt", "sge",
                                       "ult", "ule", "ugt", "uge"])
def test_cmpi(rng, predicate):
    a = random_ints(rng, np.int32, 100)
    b = np.where(rng.random(100) < 0.3, a, random_ints(rng, np.int32, 100))
    ua, ub = a.astype(np.int64) & 0xFFFFFFFF, b.astype(np.int64) & 0xFFFFFFFF
    signed = {"slt": a < b, "sle": a <= b, "sgt": a > b, "sge": a >= b}
    unsigned = {"ult": ua < ub, "ule": ua <= ub, "ugt": ua > ub, "uge": ua >= ub}
    expected = {"eq": a == b, "ne": a != b, **signed, **unsigned}[predicate]
    np.testing.assert_array_equal(run_elementwise("cmpi", [a, b], "i1", predicate=predicate),
                                  expected)


def test_i1_is_a_one_bit_integer():
    a = np.array([False, False, True, True])
    b = np.array([False, True, False, True])
    np.testing.assert_array_equal(run_elementwise("addi", [a, b], "i1"), a ^ b)
    np.testing.assert_array_equal(run_elementwise("muli", [a, b], "i1"), a & b)
    np.testing.assert_array_equal(run_elementwise("subi", [a, b], "i1"), a ^ b)
    # signed, true is -1: -1 < 0
    np.testing.assert_array_equal(run_elementwise("cmpi", [a, b], "i1", predicate="slt"),
                                  a & ~b)
    np.testing.assert_array_equal(run_elementwise("extsi", [a], "i32"), -a.astype(np.int32))
    np.testing.assert_array_equal(run_elementwise("extui", [a], "i32"), a.astype(np.int32))


def test_integer_casts(rng):
    a = random_ints(rng, np.int32, 300)
    np.testing.assert_array_equal(run_elementwise("extsi", [a], "i64"), a.astype(np.int64))
    np.testing.assert_array_equal(run_elementwise("extui", [a], "i64"),
                                  a.astype(np.int64) & 0xFFFFFFFF)
    expected8 = np.array([wrap(int(x), 8) for x in a], np.int8)
    np.testing.assert_array_equal(run_elementwise("trunci", [a], "i8"), expected8)
    np.testing.assert_array_equal(run_elementwise("trunci", [a], "i1"), (a & 1).astype(bool))
    np.testing.assert_array_equal(run_elementwise("bitcast", [a], "f32"), a.view(np.float32))


def division_kernel(name: str):
    kb = KernelBuilder("divide", [ptr("i32"), ptr("i32"), ptr("i32")])
    a, b, out = kb.args
    pid = kb.op("program_id", type=T("i32"), axis=0)
    x = kb.load(kb.op("addptr", a, pid, type=a.type))
    y = kb.load(kb.op("addptr", b, pid, type=b.type))
    kb.store(kb.op("addptr", out, pid, type=out.type), kb.op(name, x, y))
    return kb


@pytest.mark.parametrize("name", ["divsi", "remsi", "divui", "remui"])
def test_division_by_zero_raises_with_location(name):
    kb = division_kernel(name)
    module = kb.finish()
    a = np.array([5, 6, 7], np.int32)
    b = np.array([1, 2, 0], np.int32)
    with pytest.raises(KernelRuntimeError) as info:
        interpreter.run(module, (3,), [a, b, np.zeros(3, np.int32)])
    message = str(info.value)
    assert "division by zero" in message
    assert "'divide'" in message and "program (2,)" in message
    assert f"kernel.py:{kb.lines[name][0]}:5" in message, message
    assert info.value.pid == (2,) and info.value.op == name
