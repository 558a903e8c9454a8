# Property test: random small elementwise programs (ints and floats, masking, 2D broadcasting)
# agree with an element-by-element Python reference, and give bit-identical results after
# canonicalize / cse / dce.
import math
from dataclasses import dataclass
from typing import List, Tuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from interpreter_ir import NP_DTYPES, KernelBuilder, T, block_offsets, ptr, tensor
from tessera import interpreter
from tessera._tessera import passes
from test_interpreter_integers import reference as int_reference

INT_OPS = ["addi", "subi", "muli", "andi", "ori", "xori", "maxsi", "minui", "shli", "shrsi",
           "shrui", "divsi", "remsi", "select_slt", "select_ult", "widen_add"]
FLOAT_OPS = ["addf", "subf", "mulf", "divf", "maxnumf", "minimumf", "negf", "select_olt",
             "select_une", "widen_add"]
WIDER = {"i8": "i32", "i16": "i64", "i32": "i64", "i64": "i64",
         "f16": "f32", "bf16": "f64", "f32": "f64", "f64": "f64"}


@dataclass
class Program:
    element: str
    tile: Tuple[int, ...]    # (B,) or (BM, BN)
    size: Tuple[int, ...]    # (n,) or (M, N): not multiples of the tile
    ops: List[Tuple[str, int, int]]  # op, operand indices into the value pool
    other: float
    seed: int


@st.composite
def programs(draw):
    element = draw(st.sampled_from(["i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64"]))
    if draw(st.booleans()):
        tile = (draw(st.sampled_from([4, 8, 16])),)
        size = (draw(st.integers(1, 3 * tile[0])),)
        pool = 3  # x, y, splat(s)
    else:
        tile = (draw(st.sampled_from([2, 4])), draw(st.sampled_from([4, 8])))
        size = (draw(st.integers(1, 2 * tile[0])), draw(st.integers(1, 2 * tile[1])))
        pool = 5  # x, y, splat(s), broadcast row, broadcast column
    names = FLOAT_OPS if element.startswith(("f", "bf")) else INT_OPS
    ops = []
    for _ in range(draw(st.integers(1, 6))):
        ops.append((draw(st.sampled_from(names)), draw(st.integers(0, pool - 1)),
                    draw(st.integers(0, pool - 1))))
        pool += 1
    return Program(element, tile, size, ops, draw(st.sampled_from([0, 1, -3])),
                   draw(st.integers(0, 2**32 - 1)))


# --- the kernel ---------------------------------------------------------------------------------

def build(program: Program):
    e = program.element
    is_float = e.startswith(("f", "bf"))
    kb = KernelBuilder("random_program", [ptr(e)] * 5 + [T(e), T("i32"), T("i32")])
    a, b, row, col, out, s, m_arg, n_arg = kb.args
    tile = list(program.tile)
    t = tensor(tile, e)

    def masked(offsets, limit):
        return kb.cmpi("slt", offsets, kb.splat(limit, offsets.type.shape))

    if len(tile) == 1:
        offsets = block_offsets(kb, tile[0])
        mask = masked(offsets, m_arg)
        extra = []
    else:
        rows, cols = block_offsets(kb, tile[0], 0), block_offsets(kb, tile[1], 1)

        def grow(v, axis):
            shape = [tile[0], 1] if axis == 1 else [1, tile[1]]
            expanded = kb.op("expand_dims", v, type=v.type.with_shape(shape), axis=axis)
            return kb.op("broadcast", expanded, type=v.type.with_shape(tile))

        row_mask, col_mask = masked(rows, m_arg), masked(cols, n_arg)
        offsets = kb.op("addi", kb.op("muli", grow(rows, 1), kb.splat(n_arg, tile)),
                        grow(cols, 0))
        mask = kb.op("andi", grow(row_mask, 1), grow(col_mask, 0))
        extra = [grow(kb.load(kb.pointers(row, cols), col_mask), 0),
                 grow(kb.load(kb.pointers(col, rows), row_mask), 1)]
    x = kb.load(kb.pointers(a, offsets), mask, kb.const(program.other, t))
    y = kb.load(kb.pointers(b, offsets), mask)
    pool = [x, y, kb.splat(s, tile)] + extra
    for name, i, j in program.ops:
        p, q = pool[i], pool[j]
        if name.startswith("select_"):
            compare = kb.cmpf if is_float else kb.cmpi
            pool.append(kb.op("select", compare(name[7:], p, q), p, q, type=p.type))
        elif name == "widen_add":  # in a wider type, back again: must equal the narrow add
            wide = tensor(tile, WIDER[e])
            ext, add, trunc = ("extf", "addf", "truncf") if is_float else \
                ("extsi", "addi", "trunci")
            total = kb.op(add, kb.op(ext, p, type=wide), kb.op(ext, q, type=wide))
            pool.append(kb.op(trunc, total, type=t) if WIDER[e] != e else total)
        elif name == "negf":
            pool.append(kb.op("negf", p))
        elif name in ("divsi", "remsi"):  # an odd divisor is never zero
            pool.append(kb.op(name, p, kb.op("ori", q, kb.const(1, t))))
        else:
            pool.append(kb.op(name, p, q))
    kb.store(kb.pointers(out, offsets), pool[-1], mask)
    return kb.finish()


# --- the reference ------------------------------------------------------------------------------

def float_reference(name: str, a, b):
    if name in ("addf", "widen_add"):
        return a + b
    if name == "subf":
        return a - b
    if name == "mulf":
        return a * b
    if name == "divf":
        return a / b
    if name == "negf":
        return -a
    if name == "maxnumf":
        if np.isnan(a) or np.isnan(b):
            return b if np.isnan(a) else a
        return (a if not np.signbit(a) else b) if a == b == 0 else max(a, b)
    if name == "minimumf":
        if np.isnan(a) or np.isnan(b):
            return a + b  # NaN
        return (a if np.signbit(a) else b) if a == b == 0 else min(a, b)
    if name == "select_olt":
        return a if a < b else b
    if name == "select_une":
        return a if a != b else b
    raise AssertionError(name)


def element_reference(program: Program, inputs: list):
    """The program on one element, op by op, in Python on scalars of the element type."""
    dtype = NP_DTYPES[program.element]
    bits = np.dtype(dtype).itemsize * 8
    pool = list(inputs)
    for name, i, j in program.ops:
        p, q = pool[i], pool[j]
        if program.element.startswith(("f", "bf")):
            result = dtype(float_reference(name, p, q))
        else:
            ip, iq = int(p), int(q)
            if name in ("divsi", "remsi"):
                iq |= 1
            if name == "select_slt":
                value = ip if ip < iq else iq
            elif name == "select_ult":
                value = ip if ip % 2**bits < iq % 2**bits else iq
            else:
                value = int_reference("addi" if name == "widen_add" else name, ip, iq, bits)
            result = dtype(value)
        pool.append(result)
    return pool[-1]


def random_data(rng, element: str, shape):
    dtype = NP_DTYPES[element]
    if element.startswith(("f", "bf")):
        values = rng.standard_normal(shape) * np.exp2(rng.integers(-8, 8, shape))
        specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0])
        values = np.where(rng.random(shape) < 0.15, rng.choice(specials, shape), values)
        return values.astype(dtype)
    info = np.iinfo(dtype)
    small = rng.integers(-9, 10, shape)
    wide = rng.integers(info.min, info.max, shape, endpoint=True)
    return np.where(rng.random(shape) < 0.5, small, wide).astype(dtype)


def reference_run(program: Program, a, b, row, col, s):
    out = np.zeros(program.size, a.dtype)
    dtype = NP_DTYPES[program.element]
    for index in np.ndindex(*program.size):  # stored lanes only: masked lanes are not visible
        inputs = [a[index], b[index], s]
        if len(index) == 2:
            inputs += [row[index[1]], col[index[0]]]
        with np.errstate(all="ignore"):
            out[index] = element_reference(program, [dtype(v) for v in inputs])
    return out


def run_program(program: Program, module):
    rng = np.random.default_rng(program.seed)
    e = program.element
    a, b = random_data(rng, e, program.size), random_data(rng, e, program.size)
    n_last = program.size[-1]
    row, col = random_data(rng, e, n_last), random_data(rng, e, program.size[0])
    s = random_data(rng, e, ())[()]
    out = np.zeros(program.size, a.dtype)
    grid = tuple(math.ceil(n / t) for n, t in zip(program.size, program.tile))
    interpreter.run(module, grid, [a, b, row, col, out, s, program.size[0], n_last])
    return out, (a, b, row, col, s)


def assert_same(actual, expected):
    actual, expected = actual.astype(np.float64), expected.astype(np.float64)
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(actual), nan)
    np.testing.assert_array_equal(actual[~nan], expected[~nan])


PROPERTY = settings(max_examples=60, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(programs())
def test_random_programs_match_reference(program):
    out, data = run_program(program, build(program))
    assert_same(out, reference_run(program, *data))


def _missing_passes():
    names = {name for name, _ in passes.registered()}
    return sorted({"canonicalize", "cse", "dce"} - names)


@pytest.mark.skipif(bool(_missing_passes()),
                    reason=f"passes not registered yet: {_missing_passes()}")
@PROPERTY
@given(programs())
def test_random_programs_unchanged_by_cleanup_passes(program):
    module = build(program)
    before, _ = run_program(program, module)
    cleaned = module.clone()
    passes.run(cleaned, ["canonicalize", "cse", "dce"])
    after, _ = run_program(program, cleaned)
    np.testing.assert_array_equal(after.view(f"u{after.dtype.itemsize}"),
                                  before.view(f"u{before.dtype.itemsize}"))
