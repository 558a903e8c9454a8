# Whole kernels through the interpreter against NumPy: vector add with a ragged tail, masked
# loads with `other`, 2D broadcasting over a 2D grid, for / while / if with carried values.
import math

import numpy as np
from interpreter_ir import KernelBuilder, T, block_offsets, ptr, tensor
from tessera import interpreter


def build_vector_add(block: int, element: str = "f32"):
    kb = KernelBuilder("add_kernel", [ptr(element), ptr(element), ptr(element), T("i32")])
    x, y, out, n = kb.args
    offsets = block_offsets(kb, block)
    mask = kb.cmpi("slt", offsets, kb.splat(n, [block]))
    a = kb.load(kb.pointers(x, offsets), mask)
    b = kb.load(kb.pointers(y, offsets), mask)
    add = "addf" if element.startswith(("f", "bf")) else "addi"
    kb.store(kb.pointers(out, offsets), kb.op(add, a, b), mask)
    return kb.finish()


def test_vector_add_ragged_tail(rng):
    block, n = 64, 1000  # 1000 = 15 * 64 + 40: the last program is partly masked
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    interpreter.run(build_vector_add(block), (math.ceil(n / block),), [x, y, out, n])
    np.testing.assert_array_equal(out, x + y)


def test_masked_load_takes_other(rng):
    block, n = 32, 50
    kb = KernelBuilder("copy_or_other", [ptr("f32"), ptr("f32"), T("i32")])
    x, out, n_arg = kb.args
    offsets = block_offsets(kb, block)
    mask = kb.cmpi("slt", offsets, kb.splat(n_arg, [block]))
    other = kb.const(-2.5, tensor([block], "f32"))
    loaded = kb.load(kb.pointers(x, offsets), mask, other)
    kb.store(kb.pointers(out, offsets), loaded)  # unmasked: out is big enough
    x_data = rng.standard_normal(n).astype(np.float32)
    out_data = np.zeros(2 * block, np.float32)
    interpreter.run(kb.finish(), (2,), [x_data, out_data, n])
    np.testing.assert_array_equal(out_data[:n], x_data)
    np.testing.assert_array_equal(out_data[n:], np.float32(-2.5))


def test_masked_load_defaults_to_zero_and_masked_store_skips(rng):
    block = 16
    kb = KernelBuilder("k", [ptr("i32"), ptr("i32")])
    x, out = kb.args
    offsets = kb.range(0, block)
    even = kb.cmpi("eq", kb.op("andi", offsets, kb.const(1, tensor([block], "i32"))),
                   kb.const(0, tensor([block], "i32")))
    loaded = kb.load(kb.pointers(x, offsets), even)
    odd = kb.op("xori", even, kb.const(True, tensor([block], "i1")))
    kb.store(kb.pointers(out, offsets), loaded, odd)
    x_data = rng.integers(1, 100, block, dtype=np.int32)
    out_data = np.full(block, 7, np.int32)
    interpreter.run(kb.finish(), (1,), [x_data, out_data])
    expected = np.where(np.arange(block) % 2 == 1, 0, 7)  # odd lanes stored the default 0
    np.testing.assert_array_equal(out_data, expected)


def test_2d_broadcast_over_2d_grid(rng):
    bm, bn, m, n = 8, 16, 19, 37
    kb = KernelBuilder("outer_sum", [ptr("f32"), ptr("f32"), ptr("f32"), T("i32"), T("i32"),
                                     T("i32")])
    x, y, out, m_arg, n_arg, stride = kb.args
    rows = block_offsets(kb, bm, axis=0)
    cols = block_offsets(kb, bn, axis=1)
    row_mask = kb.cmpi("slt", rows, kb.splat(m_arg, [bm]))
    col_mask = kb.cmpi("slt", cols, kb.splat(n_arg, [bn]))
    xv = kb.load(kb.pointers(x, rows), row_mask)
    yv = kb.load(kb.pointers(y, cols), col_mask)

    def grow(v, axis):  # [b] -> [bm, bn] through expand_dims + broadcast
        shape = [bm, 1] if axis == 1 else [1, bn]
        e = kb.op("expand_dims", v, type=v.type.with_shape(shape), axis=axis)
        return kb.op("broadcast", e, type=v.type.with_shape([bm, bn]))

    total = kb.op("addf", grow(xv, 1), grow(yv, 0))
    offsets = kb.op("addi", kb.op("muli", grow(rows, 1), kb.splat(stride, [bm, bn])),
                    grow(cols, 0))
    mask = kb.op("andi", grow(row_mask, 1), grow(col_mask, 0))
    out_ptrs = kb.op("addptr", kb.splat(out, [bm, bn]), offsets,
                     type=tensor([bm, bn], ptr("f32")))
    kb.store(out_ptrs, total, mask)
    xd = rng.standard_normal(m).astype(np.float32)
    yd = rng.standard_normal(n).astype(np.float32)
    od = np.zeros((m, n), np.float32)
    interpreter.run(kb.finish(), (math.ceil(m / bm), math.ceil(n / bn)), [xd, yd, od, m, n, n])
    np.testing.assert_array_equal(od, xd[:, None] + yd[None, :])


def test_for_loop_carries_tensors(rng):
    # out[c] = sum over k of x[k, c], accumulated in k order in f32
    block, k_total = 32, 7
    kb = KernelBuilder("column_sum", [ptr("f32"), ptr("f32"), T("i32")])
    x, out, k_arg = kb.args
    cols = kb.range(0, block)
    zero = kb.const(0.0, tensor([block], "f32"))

    def body(k, acc):
        row_start = kb.op("muli", k, kb.const(block, "i32"))
        offsets = kb.op("addi", kb.splat(row_start, [block]), cols)
        return [kb.op("addf", acc, kb.load(kb.pointers(x, offsets)))]

    (total,) = kb.for_(kb.const(0, "i32"), k_arg, kb.const(1, "i32"), [zero], body)
    kb.store(kb.pointers(out, cols), total)
    xd = rng.standard_normal((k_total, block)).astype(np.float32)
    od = np.zeros(block, np.float32)
    interpreter.run(kb.finish(), (1,), [xd, od, k_total])
    expected = np.zeros(block, np.float32)
    for row in xd:
        expected = expected + row
    np.testing.assert_array_equal(od, expected)


def test_for_loop_with_step_and_zero_trips():
    # counts iterations of for(lb, ub, step) into a scalar
    kb = KernelBuilder("count", [ptr("i32"), T("i32"), T("i32"), T("i32")])
    out, lb, ub, step = kb.args
    (count,) = kb.for_(lb, ub, step, [kb.const(0, "i32")],
                       lambda iv, c: [kb.op("addi", c, kb.const(1, "i32"))])
    kb.store(out, count)
    module = kb.finish()
    for lower, upper, stride in [(0, 10, 3), (5, 5, 1), (7, 2, 1), (-9, 4, 4)]:
        result = np.zeros(1, np.int32)
        interpreter.run(module, (1,), [result, lower, upper, stride])
        assert result[0] == len(range(lower, upper, stride)), (lower, upper, stride)


def test_while_loop_euclid(rng):
    kb = KernelBuilder("gcd", [ptr("i32"), T("i32"), T("i32")])
    out, a, b = kb.args
    zero = kb.const(0, "i32")

    def before(x, y):
        return [kb.cmpi("ne", y, zero), x, y]

    def after(x, y):
        return [y, kb.op("remsi", x, y)]

    g, _ = kb.while_([a, b], before, after)
    kb.store(out, g)
    module = kb.finish()
    for _ in range(20):
        x, y = (int(v) for v in rng.integers(0, 10**6, 2))
        result = np.zeros(1, np.int32)
        interpreter.run(module, (1,), [result, x, y])
        assert result[0] == math.gcd(x, y), (x, y)


def test_if_yields_per_program(rng):
    # even programs store 2 * x, odd programs store x - 1
    block, programs = 8, 6
    kb = KernelBuilder("branchy", [ptr("f32"), ptr("f32")])
    x, out = kb.args
    offsets = block_offsets(kb, block)
    values = kb.load(kb.pointers(x, offsets))
    pid = kb.op("program_id", type=T("i32"), axis=0)
    even = kb.cmpi("eq", kb.op("remsi", pid, kb.const(2, "i32")), kb.const(0, "i32"))
    (result,) = kb.if_(
        even, [values.type],
        lambda: [kb.op("mulf", values, kb.const(2.0, values.type))],
        lambda: [kb.op("subf", values, kb.const(1.0, values.type))])
    kb.store(kb.pointers(out, offsets), result)
    xd = rng.standard_normal(block * programs).astype(np.float32)
    od = np.zeros_like(xd)
    interpreter.run(kb.finish(), (programs,), [xd, od])
    program = np.arange(xd.size) // block
    np.testing.assert_array_equal(od, np.where(program % 2 == 0, xd * np.float32(2),
                                                xd - np.float32(1)))


def test_programs_run_in_row_major_order():
    # each program appends its (pid0, pid1) at slot counter[0]: the order is observable
    kb = KernelBuilder("order", [ptr("i32"), ptr("i32")])
    log, counter = kb.args
    slot = kb.load(counter)
    p0 = kb.op("program_id", type=T("i32"), axis=0)
    p1 = kb.op("program_id", type=T("i32"), axis=1)
    n1 = kb.op("num_programs", type=T("i32"), axis=1)
    kb.store(kb.op("addptr", log, slot, type=ptr("i32")),
             kb.op("addi", kb.op("muli", p0, n1), p1))
    kb.store(counter, kb.op("addi", slot, kb.const(1, "i32")))
    log_data, counter_data = np.full(6, -1, np.int32), np.zeros(1, np.int32)
    interpreter.run(kb.finish(), (2, 3), [log_data, counter_data])
    np.testing.assert_array_equal(log_data, np.arange(6))


def test_vector_add_many_programs_is_fast(rng):
    import time

    n, block = 4096 * 16, 16
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    module = build_vector_add(block)
    start = time.perf_counter()
    interpreter.run(module, (n // block,), [x, y, out, n])
    elapsed = time.perf_counter() - start
    np.testing.assert_array_equal(out, x + y)
    assert elapsed < 10, f"4096 programs took {elapsed:.1f} s"
