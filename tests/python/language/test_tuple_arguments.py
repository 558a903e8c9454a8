"""Tuples as Triton 3.x has them: tuple kernel arguments (nested, with None and tl.constexpr
elements, namedtuples), tl.tuple values, indexing with constexpr indices, len(), slicing,
iteration in static loops, tuples returned from @jit helpers and carried through runtime
loops and ifs. Run in the interpreter against NumPy on ragged sizes."""
from collections import namedtuple

import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.runtime import specialization, tuple_arguments

BLOCK = 128
Pair = namedtuple("Pair", ["x", "y"])


@tessera.jit(interpret=True)
def weighted_sum(ptrs, weights, out_ptr, n, BLOCK: tl.constexpr):
    # out = sum_i weights[i] * ptrs[i][...], over a tuple of any length (unrolled)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.zeros((BLOCK,), tl.float32)
    for i in tl.static_range(len(ptrs)):
        acc += weights[i] * tl.load(ptrs[i] + offs, mask=mask)
    tl.store(out_ptr + offs, acc, mask=mask)


@tessera.jit
def _min_max(a, b):
    return tl.minimum(a, b), tl.maximum(a, b)


@tessera.jit(interpret=True)
def nested(args, out, n, BLOCK: tl.constexpr):
    # args = ((x_ptr, scale), (None, tl.constexpr(3)), Pair(x=y_ptr, y=shift))
    first, second, pair = args
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(first[0] + offs, mask=mask) * first[1]
    if second[0] is None:
        x = x + second[1]
    y = tl.load(pair.x + offs, mask=mask) + pair.y
    lo_hi = _min_max(x, y)                      # a tuple returned by a helper
    rest = args[1:]                             # a slice of a tuple is a tuple
    tl.static_assert(len(rest) == 2)
    tl.store(out[0] + offs, lo_hi[0], mask=mask)
    tl.store(out[1] + offs, lo_hi[1], mask=mask)


@tessera.jit(interpret=True)
def carried(x_ptr, out_ptr, steps, n, BLOCK: tl.constexpr):
    # a tuple of tensors carried through a runtime loop and a runtime if
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    state = tl.tuple([x, tl.zeros((BLOCK,), tl.float32), 2.0])
    for _ in range(steps):
        state = (state[0] * 0.5, state[1] + state[0], state[2])
    if steps > 2:
        state = (state[0], state[1] * state[2], state[2])
    tl.store(out_ptr + offs, state[1], mask=mask)


def _rng():
    return np.random.default_rng()


@pytest.mark.parametrize("count", [1, 3])
def test_tuple_of_pointers_and_scalars(count):
    rng = _rng()
    n = int(rng.integers(200, 700))
    xs = tuple(rng.standard_normal(n).astype(np.float32) for _ in range(count))
    weights = tuple(float(w) for w in rng.standard_normal(count))
    out = np.zeros(n, np.float32)
    weighted_sum[(tessera.cdiv(n, BLOCK),)](xs, weights, out, n, BLOCK=BLOCK)
    expected = sum(np.float64(w) * x.astype(np.float64) for w, x in zip(weights, xs))
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_nested_tuples_none_constexpr_and_namedtuple():
    rng = _rng()
    n = int(rng.integers(200, 700))
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    lo, hi = np.zeros(n, np.float32), np.zeros(n, np.float32)
    scale, shift = float(rng.standard_normal()), float(rng.standard_normal())
    args = ((x, scale), (None, tl.constexpr(3)), Pair(x=y, y=shift))
    nested[(tessera.cdiv(n, BLOCK),)](args, (lo, hi), n, BLOCK=BLOCK)
    a = x.astype(np.float64) * np.float32(scale) + 3
    b = y.astype(np.float64) + np.float32(shift)
    np.testing.assert_allclose(lo, np.minimum(a, b), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(hi, np.maximum(a, b), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("steps", [0, 2, 5])
def test_tuple_carried_through_loop_and_if(steps):
    rng = _rng()
    n = int(rng.integers(100, 400))
    x = rng.standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    carried[(tessera.cdiv(n, BLOCK),)](x, out, steps, n, BLOCK=BLOCK)
    a, b = x.astype(np.float64), np.zeros(n)
    for _ in range(steps):
        a, b = a * 0.5, b + a
    if steps > 2:
        b = b * 2.0
    np.testing.assert_allclose(out, b, rtol=1e-6, atol=1e-6)


def test_each_element_is_specialized():
    """An element's specialization (an int equal to 1, a multiple of 16) is its own; a
    changed constexpr element compiles another kernel; the signature names elements by path."""
    n = 40
    x = np.zeros(n, np.float32)
    keys = [weighted_sum._arguments(((x, x), (w, 1), x, n), {"BLOCK": 64})[2][1]
            for w in (1, 16, 3)]
    assert [k[2][0][3] for k in keys] == [True, False, False]     # equal to 1
    assert [k[2][0][2] for k in keys] == [False, True, False]     # divisible by 16
    signature, div16, eq1, _ = weighted_sum._specialization(
        weighted_sum._arguments(((x, x), (1, 5), x, n), {"BLOCK": 64})[2])
    assert list(signature)[:4] == ["ptrs.0", "ptrs.1", "weights.0", "weights.1"]
    assert "weights.0" in eq1
    key = tuple_arguments.key((x, None, tl.constexpr(4), ()), specialization.argument_key)
    leaves = list(tuple_arguments.leaves("t", key))
    assert [(p, tuple_arguments.is_compile_time(k)) for p, k, _ in leaves] == [
        ("t.0", False), ("t.1", True), ("t.2", True), ("t.3", True)]


def test_tuple_element_of_wrong_kind_names_the_argument():
    n = 10
    with pytest.raises(TypeError, match="ptrs"):
        weighted_sum[(1,)](({"a": 1},), (1.0,), np.zeros(n, np.float32), n, BLOCK=BLOCK)


@tessera.jit(interpret=True)
def loop_over_tuple(ptrs, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for p in ptrs:  # iterating a tuple unrolls
        acc = tl.maximum(acc, tl.load(p + offs, mask=offs < n, other=0.0))
    tl.store(out_ptr + offs, acc, mask=offs < n)


def test_iterating_a_tuple_argument():
    rng = _rng()
    n = int(rng.integers(50, BLOCK))
    xs = tuple(rng.standard_normal(n).astype(np.float32) for _ in range(4))
    out = np.zeros(n, np.float32)
    loop_over_tuple[(1,)](xs, out, n, BLOCK=BLOCK)
    np.testing.assert_array_equal(out, np.maximum(np.max(np.stack(xs), axis=0), 0))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_tuple_arguments_compile(arch):
    """The compiled function takes one parameter per runtime element (None and constexpr
    elements are none); ptxas accepts it."""
    from tessera.compiler import ptxas
    n = 300
    x, y = np.zeros(n, np.float32), np.zeros(n, np.float32)
    args = ((x, 2.0), (None, tl.constexpr(3)), Pair(x=y, y=1.5))
    stages = nested.asm(args, (x, y), n, BLOCK=BLOCK, arch=arch)
    entry = stages["ptx"].split(".entry", 1)[1].split(")", 1)[0]
    assert entry.count(".param") == 7  # x, scale, y, shift, out.0, out.1, n
    if ptxas.find_ptxas() is not None:
        assert "cubin" in stages


def test_warmup_with_a_tuple_of_stand_ins():
    """kernel.warmup takes dtypes inside a tuple argument as stand-ins (compiles, no launch)."""
    compiled = tessera.jit(weighted_sum.fn).warmup((tl.float32, tl.float32), (1.5, 2.5),
                                                   tl.float32, 100, BLOCK=BLOCK, grid=(1,))
    entry = compiled.asm["ptx"].split(".entry", 1)[1].split(")", 1)[0]
    assert entry.count(".param") == 6  # ptrs.0, ptrs.1, weights.0, weights.1, out_ptr, n


@tessera.jit
def _pick(pair, flag):
    if flag > 0:  # an early return of a namedtuple under a runtime condition
        return Pair(x=pair.y, y=pair.x)
    return pair


@tessera.jit(interpret=True)
def swap_if(pair, out, flag, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    loaded = Pair(x=tl.load(pair.x + offs, mask=m), y=tl.load(pair.y + offs, mask=m))
    picked = _pick(loaded, flag)
    tl.store(out + offs, picked.x - picked.y, mask=m)


@pytest.mark.parametrize("flag", [0, 1])
def test_namedtuple_through_an_early_return(flag):
    rng = _rng()
    n = int(rng.integers(10, BLOCK))
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    swap_if[(1,)](Pair(x=x, y=y), out, flag, n, BLOCK=BLOCK)
    np.testing.assert_array_equal(out, (y - x) if flag else (x - y))
