"""Kernels through the front end: the IR each language feature produces, verified.

Covers vector add, masked loads with `other`, 2D tiles with x[:, None], loops with carried
values, while, if/else with results, nested @jit calls, static_range, constexpr-folded ifs,
argument specialization (divisibility, equal_to_1) and source locations.
"""
import pytest

import tessera
import tessera.language as tl
from tessera.frontend import build_module


class StubJIT:
    """Stands in for tessera.jit's JITFunction: what the front end needs of it."""
    __tessera_jit__ = True

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = fn.__name__


def jit(fn):
    return StubJIT(fn)


def walk(block):
    for op in block.operations:
        yield op
        for i in range(op.num_regions):
            yield from walk(op.body(i))


def func_of(module):
    (func,) = module.functions()
    return func


def names(module):
    return [op.name for op in walk(func_of(module).body(0))]


def top_level(module):
    return [op.name for op in func_of(module).body(0).operations]


def first(module, name):
    return next(op for op in walk(func_of(module).body(0)) if op.name == name)


def types_of(values):
    return [str(v.type) for v in values]


def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    output = x + y
    tl.store(out_ptr + offsets, output, mask=mask)


ADD_SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n_elements": "i32"}


def test_vector_add():
    module = build_module(add_kernel, ADD_SIG, {"BLOCK_SIZE": 1024},
                          divisibility_16={"x_ptr", "y_ptr", "out_ptr"})
    module.verify()
    func = func_of(module)
    assert func.attrs["sym_name"] == "add_kernel"
    assert func.attrs["divisibility"] == [16, 16, 16, 1]
    assert types_of(func.body(0).arguments) == ["ptr<f32>", "ptr<f32>", "ptr<f32>", "i32"]
    ops = names(module)
    assert ops.count("load") == 2 and ops.count("store") == 1 and ops.count("addptr") == 3
    assert first(module, "make_range").attrs == {"start": 0, "end": 1024}
    assert first(module, "cmpi").attrs["predicate"] == "slt"
    store = first(module, "store")
    assert types_of(store.operands) == ["tensor<1024xptr<f32>>", "tensor<1024xf32>",
                                        "tensor<1024xi1>"]
    assert str(first(module, "addf").result(0).type) == "tensor<1024xf32>"


def test_kernel_name_override_and_constexpr_default():
    def kernel(x_ptr, BLOCK: tl.constexpr = 64):
        tl.store(x_ptr + tl.arange(0, BLOCK), 1.0)

    module = build_module(kernel, {"x_ptr": "*fp16"}, {}, kernel_name="renamed")
    module.verify()
    assert func_of(module).attrs["sym_name"] == "renamed"
    assert str(first(module, "make_range").result(0).type) == "tensor<64xi32>"
    constant = first(module, "constant")  # the stored 1.0, made directly in the pointee type
    assert str(constant.result(0).type) == "f16" and constant.attrs["value"] == 1.0


def masked_kernel(x_ptr, out_ptr, n, OTHER: tl.constexpr):
    offs = tl.arange(0, 128)
    x = tl.load(x_ptr + offs, mask=offs < n, other=OTHER)
    first_value = tl.load(x_ptr, mask=n > 0, other=0)
    tl.store(out_ptr + offs, x + first_value, mask=offs < n)


@pytest.mark.parametrize("sig,other,other_type,value", [
    ("*fp16", 0.0, "f16", 0.0), ("*fp32", -1, "f32", -1.0), ("*i32", 2.7, "i32", 2),
])
def test_masked_load_with_other(sig, other, other_type, value):
    module = build_module(masked_kernel, {"x_ptr": sig, "out_ptr": sig, "n": "i32"},
                          {"OTHER": other})
    module.verify()
    loads = [op for op in walk(func_of(module).body(0)) if op.name == "load"]
    tile_load, scalar_load = loads
    assert len(tile_load.operands) == 3
    other_splat = tile_load.operands[2].defining_op
    assert other_splat.name == "splat"
    constant = other_splat.operands[0].defining_op
    assert str(constant.result(0).type) == other_type and constant.attrs["value"] == value
    assert types_of(scalar_load.operands)[1] == "i1"  # a scalar mask for a scalar pointer
    assert str(scalar_load.result(0).type) == other_type


def tile_kernel(x_ptr, out_ptr, stride_m, M: tl.constexpr, N: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    ptrs = x_ptr + rm[:, None] * stride_m + rn[None, :]
    tile = tl.load(ptrs, mask=rn[None, :] < stride_m, other=0.0)
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], tile * 2.0)


def test_2d_tile_broadcasting():
    module = build_module(tile_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp16", "stride_m": "i32"},
                          {"M": 16, "N": 32})
    module.verify()
    load = first(module, "load")
    assert types_of(load.operands) == ["tensor<16x32xptr<f32>>", "tensor<16x32xi1>",
                                       "tensor<16x32xf32>"]
    broadcasts = [str(op.result(0).type) for op in walk(func_of(module).body(0))
                  if op.name == "broadcast"]
    assert "tensor<16x32xptr<f32>>" in broadcasts and "tensor<16x32xi32>" in broadcasts
    store = first(module, "store")  # fp32 values stored through an fp16 pointer: truncf
    assert types_of(store.operands) == ["tensor<16x32xptr<f16>>", "tensor<16x32xf16>"]
    assert store.operands[1].defining_op.name == "truncf"


def sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    count = 0
    unused = 3.0
    for i in range(0, n, 2):
        acc += tl.load(x_ptr + i * BLOCK + offs)
        count = count + 1
        scratch = acc * 2  # noqa: F841 (first assigned inside: not carried)
    tl.store(out_ptr + offs, acc / count + unused)


def test_for_loop_carries_modified_variables():
    module = build_module(sum_kernel, {"x_ptr": "*fp16", "out_ptr": "*fp32", "n": "i32"},
                          {"BLOCK": 64})
    module.verify()
    loop = first(module, "for")
    assert types_of(loop.results) == ["tensor<64xf32>", "i32"]  # acc, count
    assert types_of(loop.body(0).arguments) == ["i32", "tensor<64xf32>", "i32"]
    lb, ub, step = loop.operands[:3]
    assert lb.defining_op.attrs["value"] == 0 and step.defining_op.attrs["value"] == 2
    assert ub is func_of(module).body(0).arguments[2]
    yield_op = loop.body(0).operations[-1]
    assert yield_op.name == "yield" and types_of(yield_op.operands) == types_of(loop.results)
    # The loaded fp16 tile is widened before accumulating into fp32.
    assert "extf" in [op.name for op in loop.body(0).operations]
    # After the loop, uses read the loop's results.
    divf = first(module, "fast_divf")  # fp32 "/": div.full.f32, as Triton's
    assert divf.operands[0] is loop.results[0]


def nested_loop_kernel(out_ptr, n, m):
    total = tl.zeros([], dtype=tl.int64)  # i * j is an int64: so must total be
    for i in range(n):
        for j in tl.range(0, m, num_stages=3):
            total += i * j
    tl.store(out_ptr, total)


def test_nested_loops_and_range_hints():
    module = build_module(nested_loop_kernel, {"out_ptr": "*i64", "n": "i64", "m": "i32"}, {})
    module.verify()
    outer, inner = [op for op in walk(func_of(module).body(0)) if op.name == "for"]
    assert types_of(outer.body(0).arguments) == ["i64", "i64"]  # n is i64: so is the iv
    assert types_of(inner.body(0).arguments) == ["i32", "i64"]
    assert inner.attrs == {"num_stages": 3} and outer.attrs == {}
    assert inner.operands[3] is outer.body(0).arguments[1]  # the inner loop carries total


def countdown_kernel(out_ptr):
    acc = 0
    for i in range(10, 0, -3):  # 10, 7, 4, 1
        acc = acc * 100 + i
    tl.store(out_ptr, acc)


def test_negative_constexpr_step_counts_down():
    module = build_module(countdown_kernel, {"out_ptr": "*i32"}, {})
    module.verify()
    loop = first(module, "for")
    lb, ub, step = [v.defining_op.attrs["value"] for v in loop.operands[:3]]
    assert (lb, ub, step) == (0, 10, 3)
    body = [op.name for op in loop.body(0).operations]
    # i = lb + ub - iv: computed at the top of the body.
    assert body[:2] == ["addi", "subi"]


def while_kernel(out_ptr, n):
    i = 0
    value = 1.0
    while i < n:
        value = value * 2.0
        i += 1
    tl.store(out_ptr, value)


def test_while_loop():
    module = build_module(while_kernel, {"out_ptr": "*fp32", "n": "i32"}, {})
    module.verify()
    loop = first(module, "while")
    # Carried in order of first assignment in the body: value, then i.
    assert types_of(loop.results) == ["f32", "i32"]
    before, after = loop.body(0), loop.body(1)
    assert [op.name for op in before.operations] == ["cmpi", "condition"]
    assert before.operations[0].operands[0] is before.arguments[1]  # i < n reads the new i
    condition = before.operations[-1]
    assert list(condition.operands[1:]) == list(before.arguments)
    assert [op.name for op in after.operations] == ["constant", "mulf", "constant", "addi",
                                                    "yield"]
    assert first(module, "store").operands[1] is loop.results[0]


def branch_kernel(out_ptr, n, flag):
    x = tl.zeros([32], dtype=tl.float32)
    y = 1
    if n > 4:
        x = x + 1.0
        z = x * 2.0
    else:
        y = y + n
        z = x - 1.0
    if flag:
        x = x * 3.0
    w = 5 if n > 0 else n
    tl.store(out_ptr + tl.arange(0, 32), x + z + y + w)


def test_if_else_with_results():
    module = build_module(branch_kernel, {"out_ptr": "*fp32", "n": "i32", "flag": "i1"}, {})
    module.verify()
    if_ops = [op for op in func_of(module).body(0).operations if op.name == "if"]
    assert len(if_ops) == 3
    first_if, second_if, ternary = if_ops
    # x (changed in then), y (changed in else), z (new in both branches), in that order.
    assert types_of(first_if.results) == ["tensor<32xf32>", "i32", "tensor<32xf32>"]
    then_yield = first_if.body(0).operations[-1]
    else_yield = first_if.body(1).operations[-1]
    assert [v.defining_op.name for v in then_yield.operands] == ["addf", "constant", "mulf"]
    assert [v.defining_op.name for v in else_yield.operands] == ["splat", "addi", "subf"]
    y_livein = then_yield.operands[1].defining_op  # unchanged in then: the value before the if
    assert y_livein.attrs["value"] == 1 and y_livein.parent_block is func_of(module).body(0)
    assert types_of(second_if.results) == ["tensor<32xf32>"]
    assert second_if.operands[0] is func_of(module).body(0).arguments[2]  # the i1 flag
    assert second_if.body(1).operations[0].operands[0] is first_if.results[0]
    assert types_of(ternary.results) == ["i32"]


@pytest.fixture
def helpers():
    @jit
    def scale(x, FACTOR: tl.constexpr):
        if FACTOR == 1:  # constexpr-folded inside the callee
            return x
        return x * FACTOR

    @jit
    def clamp_scale(x, lo, FACTOR: tl.constexpr = 3):
        y = scale(x, FACTOR)
        return tl.maximum(y, lo), y

    return scale, clamp_scale


def test_nested_jit_calls_are_inlined(helpers):
    scale, clamp_scale = helpers

    def kernel(x_ptr, lo, SCALE_BY: tl.constexpr):
        x = tl.load(x_ptr + tl.arange(0, 16))
        clamped, scaled = clamp_scale(x, lo)
        same = scale(x, SCALE_BY)
        tl.store(x_ptr + tl.arange(0, 16), clamped + scaled + same)

    module = build_module(kernel, {"x_ptr": "*fp32", "lo": "fp32"}, {"SCALE_BY": 1})
    module.verify()
    ops = names(module)
    assert ops.count("mulf") == 1  # scale(x, 3) multiplies; scale(x, 1) returns x itself
    assert "maxnumf" in ops
    mulf = first(module, "mulf")
    assert mulf.operands[1].defining_op.operands[0].defining_op.attrs["value"] == 3.0
    # Inlined ops carry the callee's own source locations.
    text = module.str(locations=True)
    assert "return x * FACTOR" not in text and "test_kernels.py" in text


def static_kernel(out_ptr, UNROLL: tl.constexpr, MODE: tl.constexpr):
    acc = tl.zeros([8], dtype=tl.float32)
    for k in tl.static_range(UNROLL):
        acc = acc + k
    if MODE == "double":
        acc = acc * 2.0
    elif MODE == "negate":
        acc = -acc
    else:
        tl.static_assert(MODE == "keep")
    tl.store(out_ptr + tl.arange(0, 8), acc)


@pytest.mark.parametrize("mode,expected", [("double", "mulf"), ("negate", "negf"),
                                           ("keep", None)])
def test_static_range_unrolls_and_constexpr_if_folds(mode, expected):
    module = build_module(static_kernel, {"out_ptr": "*fp32"}, {"UNROLL": 4, "MODE": mode})
    module.verify()
    ops = top_level(module)
    assert "for" not in ops and "if" not in ops
    assert ops.count("addf") == 4
    added = [op.operands[1].defining_op.operands[0].defining_op.attrs["value"]
             for op in func_of(module).body(0).operations if op.name == "addf"]
    assert added == [0.0, 1.0, 2.0, 3.0]
    for other in ("mulf", "negf"):
        assert (other in ops) == (other == expected)


def equal_to_one_kernel(x_ptr, stride, n):
    offs = tl.arange(0, 16) * stride
    tl.store(x_ptr + offs, offs, mask=offs < n)


def test_equal_to_1_keeps_the_argument_and_uses_the_constant():
    module = build_module(equal_to_one_kernel, {"x_ptr": "*i32", "stride": "i32", "n": "i32"},
                          {}, equal_to_1={"stride"}, divisibility_16={"n"})
    module.verify()
    func = func_of(module)
    assert types_of(func.body(0).arguments) == ["ptr<i32>", "i32", "i32"]
    assert func.attrs["divisibility"] == [1, 1, 16]
    stride = func.body(0).arguments[1]
    assert not stride.users
    muli = first(module, "muli")
    assert muli.operands[1].defining_op.operands[0].defining_op.attrs["value"] == 1


def builtins_kernel(x_ptr, n, BLOCK: tl.constexpr):
    GRID: tl.constexpr = tl.cdiv(1000, BLOCK)
    tl.static_assert(GRID == 8)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    lo = min(x, 0)
    hi = max(x, n, 3)
    blocks = tl.cdiv(n, BLOCK)
    tl.store(x_ptr + offs, tl.where(offs < blocks, lo + hi, x))
    tl.store(x_ptr + offs, tl.minimum(x, tl.num_programs(0)))


def test_min_max_cdiv_num_programs():
    module = build_module(builtins_kernel, {"x_ptr": "*i32", "n": "i32"}, {"BLOCK": 128})
    module.verify()
    ops = names(module)
    assert ops.count("minsi") == 2 and ops.count("maxsi") == 2
    assert "divsi" in ops and "num_programs" in ops  # cdiv on a value: (n + 128 - 1) // 128


def test_every_op_has_a_location_in_the_kernel_source():
    module = build_module(sum_kernel, {"x_ptr": "*fp16", "out_ptr": "*fp32", "n": "i32"},
                          {"BLOCK": 64})
    ops = list(walk(func_of(module).body(0)))
    assert all(op.location.startswith(__file__ + ":") for op in ops)
    lines = open(__file__).read().splitlines()
    target = next(i for i, line in enumerate(lines) if "acc += tl.load(x_ptr + i * BLOCK" in line)
    col = lines[target].index("tl.load(x_ptr + i * BLOCK") + 1
    load = first(module, "load")
    assert load.location == f"{__file__}:{target + 1}:{col}"


def cache_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, cache_modifier=".cg", eviction_policy="evict_last",
                volatile=True)
    tl.store(x_ptr + offs, x, cache_modifier=".cs")


def test_load_store_attributes_and_numpy_constexprs():
    import numpy as np

    module = build_module(cache_kernel, {"x_ptr": "*fp32"}, {"BLOCK": np.int64(32)})
    module.verify()
    assert first(module, "load").attrs == {"cache": ".cg", "evict": "evict_last",
                                           "volatile": True}
    assert first(module, "store").attrs == {"cache": ".cs"}
    assert str(first(module, "make_range").result(0).type) == "tensor<32xi32>"


def tessera_cdiv_kernel(x_ptr, n, BLOCK: tl.constexpr):
    import_free = tessera.cdiv(n, BLOCK)  # the host helper means the same in a kernel
    FOLDED: tl.constexpr = tessera.cdiv(100, BLOCK)
    tl.static_assert(FOLDED == 4)
    tl.store(x_ptr, import_free)


def test_tessera_cdiv_inside_kernels():
    module = build_module(tessera_cdiv_kernel, {"x_ptr": "*i32", "n": "i32"}, {"BLOCK": 32})
    module.verify()
    assert [n for n in top_level(module) if n in ("addi", "subi", "divsi")] == \
        ["addi", "subi", "divsi"]


def masked_running_max(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    best = tl.full([BLOCK], float("-inf"), tl.float32)
    steps = 0
    for start in range(0, n, BLOCK):
        x = tl.load(x_ptr + start + offs, mask=start + offs < n, other=float("-inf"))
        if start > 0:  # a runtime if inside a runtime loop, updating carried values
            best = tl.maximum(best, x)
            steps += 1
        else:
            best = x
    tl.store(out_ptr + offs, best + steps)


def test_runtime_if_inside_a_loop_updates_carried_values():
    module = build_module(masked_running_max, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
                          {"BLOCK": 16})
    module.verify()
    loop = first(module, "for")
    if_op = next(op for op in loop.body(0).operations if op.name == "if")
    assert types_of(loop.results) == ["tensor<16xf32>", "i32"]
    assert types_of(if_op.results) == ["tensor<16xf32>", "i32"]
    assert list(loop.body(0).operations[-1].operands) == list(if_op.results)
    assert "maxnumf" in [op.name for op in if_op.body(0).operations]
