# Atomics through the front end and the interpreter, against sequential NumPy / Python
# references: every element applied once, in row-major order within a tile and in program
# order across programs; old values returned, 0 where masked off; fresh random inputs.
import numpy as np
import pytest

import tessera
import tessera.language as tl


@pytest.fixture(autouse=True)
def interpret():
    tessera.config.knobs.interpret = True
    yield
    tessera.config.knobs.reset("interpret")


@tessera.jit
def rmw_kernel(target_ptr, index_ptr, value_ptr, old_ptr, n, OP: tl.constexpr,
               BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    index = tl.load(index_ptr + offs, mask=mask)
    value = tl.load(value_ptr + offs, mask=mask)
    old = getattr(tl, "atomic_" + OP)(target_ptr + index, value, mask=mask)
    tl.store(old_ptr + offs, old, mask=mask)


COMBINE = {"add": lambda a, b: a + b, "max": max, "min": min, "and": lambda a, b: a & b,
           "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b, "xchg": lambda a, b: b}


def sequential(op, target, index, values, block):
    """The reference: one element at a time, in order, in the element type. Float max/min
    are two atomics per tile, as Triton's (the non-negative values, then the negative ones),
    so within each program's block their lanes apply in that order."""
    target = target.copy()
    old = np.zeros_like(values)
    order = np.arange(len(values))
    if op in ("max", "min") and values.dtype.kind == "f":
        order = np.concatenate([np.concatenate([chunk[values[chunk] >= 0],
                                                chunk[values[chunk] < 0]])
                                for chunk in np.split(order, range(block, len(order), block))])
    with np.errstate(over="ignore"):  # integer adds wrap
        for i in order:
            old[i] = target[index[i]]
            target[index[i]] = np.asarray(COMBINE[op](target[index[i]], values[i]), target.dtype)
    return target, old


def random_values(rng, dtype, n):
    if np.dtype(dtype).kind == "f":
        return (rng.standard_normal(n) * 8).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min // 4, info.max // 4, n, dtype=dtype)


CASES = [("add", np.int32), ("add", np.uint64), ("add", np.float32), ("add", np.float16),
         ("add", np.float64), ("max", np.int32), ("max", np.uint32), ("min", np.int64),
         ("max", np.float32), ("min", np.float64), ("and", np.int32), ("or", np.uint64),
         ("xor", np.int64), ("xchg", np.float32), ("xchg", np.int64)]


@pytest.mark.parametrize("op,dtype", CASES, ids=[f"{o}-{np.dtype(d).name}" for o, d in CASES])
def test_rmw_matches_sequential_execution(rng, op, dtype):
    n, bins, block = 300, 7, 64  # 5 programs, a partial last one, many repeated addresses
    index = rng.integers(0, bins, n).astype(np.int32)
    values = random_values(rng, dtype, n)
    target = random_values(rng, dtype, bins)
    expected_target, expected_old = sequential(op, target, index, values, block)
    old = np.full(n, 99, dtype)
    rmw_kernel[(tessera.cdiv(n, block),)](target, index, values, old, n, OP=op, BLOCK=block)
    np.testing.assert_array_equal(target, expected_target)
    np.testing.assert_array_equal(old, expected_old)


@tessera.jit
def counter_kernel(counter_ptr, old_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    ticket = tl.atomic_add(counter_ptr + offs * 0, 1, sem="relaxed")  # one address, a tile
    tl.store(old_ptr + tl.program_id(0) * BLOCK + offs, ticket)
    first = tl.atomic_add(counter_ptr + 1, 1)  # a scalar: once per program
    tl.store(old_ptr + 1000 + tl.program_id(0), first)


def test_repeated_addresses_apply_in_row_major_order_and_scalars_once_per_program():
    counter = np.zeros(2, np.int32)
    old = np.zeros(1004, np.int32)
    counter_kernel[(4,)](counter, old, BLOCK=16)
    np.testing.assert_array_equal(old[:64], np.arange(64))
    np.testing.assert_array_equal(old[1000:1004], np.arange(4))
    np.testing.assert_array_equal(counter, [64, 4])


def test_masked_lanes_are_not_touched_and_return_zero(rng):
    n, block = 50, 64
    index = np.arange(64, dtype=np.int32)
    values = rng.standard_normal(64).astype(np.float32)
    target = rng.standard_normal(64).astype(np.float32)
    before = target.copy()
    old = np.full(64, np.nan, np.float32)
    rmw_kernel[(1,)](target, index, values, old, n, OP="add", BLOCK=block)
    np.testing.assert_array_equal(target[n:], before[n:])
    np.testing.assert_array_equal(target[:n], before[:n] + values[:n])
    assert np.all(np.isnan(old[n:]))  # the kernel stores old values only where mask holds


@tessera.jit
def masked_old_kernel(target_ptr, old_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(old_ptr + offs, tl.atomic_xchg(target_ptr + offs, 5, mask=offs < n))


def test_masked_lanes_return_zero():
    target = np.full(8, 3, np.int32)
    old = np.full(8, -1, np.int32)
    masked_old_kernel[(1,)](target, old, 5, BLOCK=8)
    np.testing.assert_array_equal(old, [3, 3, 3, 3, 3, 0, 0, 0])
    np.testing.assert_array_equal(target, [5, 5, 5, 5, 5, 3, 3, 3])


@tessera.jit
def cas_kernel(target_ptr, cmp_ptr, value_ptr, old_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    old = tl.atomic_cas(target_ptr + offs, tl.load(cmp_ptr + offs), tl.load(value_ptr + offs))
    tl.store(old_ptr + offs, old)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float16])
def test_cas_swaps_where_the_bits_match(rng, dtype):
    target = random_values(rng, dtype, 32)
    cmp = random_values(rng, dtype, 32)
    cmp[::2] = target[::2]  # half of them match
    if np.dtype(dtype).kind == "f":
        target[1], cmp[1] = -0.0, 0.0  # equal as floats, not as bits: no swap
        target[3] = cmp[3] = np.nan  # NaN: unequal as floats, equal bits: swap
    value = random_values(rng, dtype, 32)
    before = target.copy()
    old = np.zeros_like(target)
    cas_kernel[(1,)](target, cmp, value, old, BLOCK=32)
    bits = np.dtype(f"u{np.dtype(dtype).itemsize}")
    swap = before.view(bits) == cmp.view(bits)
    np.testing.assert_array_equal(old.view(bits), before.view(bits))
    np.testing.assert_array_equal(target.view(bits), np.where(swap, value, before).view(bits))
    assert swap[::2].all() and not swap[1::2][1:].all()


@tessera.jit
def masked_cas_kernel(target_ptr, cmp_ptr, value_ptr, old_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    cmp = tl.load(cmp_ptr + offs, mask=mask)
    value = tl.load(value_ptr + offs, mask=mask)
    ptrs = target_ptr + tl.where(mask, offs, 0)
    old = tl.atomic_cas(ptrs, cmp, tl.where(mask, value, cmp))  # masked lanes change nothing
    tl.store(old_ptr + offs, old, mask=mask)


def test_cas_also_swaps_integers_equal_by_chance():
    # Regression for tests/gpu/test_atomics.py, whose reference swapped only the elements it
    # had copied into cmp: random integers also match by chance, and those swap too.
    rng = np.random.default_rng(15)  # a fixed draw with chance matches (about 4.5 expected)
    n = 3001
    target = (rng.standard_normal(n) * 100).astype(np.int32)
    cmp = (rng.standard_normal(n) * 100).astype(np.int32)
    copied = rng.random(n) < 0.5
    cmp[copied] = target[copied]
    value = (rng.standard_normal(n) * 100).astype(np.int32)
    initial = target.copy()
    old = np.zeros_like(target)
    masked_cas_kernel[(tessera.cdiv(n, 512),)](target, cmp, value, old, n, BLOCK=512)
    swap = cmp == initial
    assert (swap & ~copied).any()  # what the old reference missed
    np.testing.assert_array_equal(old, initial)
    np.testing.assert_array_equal(target, np.where(swap, value, initial))
