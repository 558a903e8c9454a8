# Property test through the front end: random small 2-D kernels written in the DSL, whose values
# have different shapes (a full tile, a column x[:, None], a row y[None, :], a runtime scalar,
# Python constants) and so broadcast implicitly, with bounds masks, data-dependent load masks
# (`other` fills the masked lanes) and data-dependent store masks (masked lanes keep their
# poison). The interpreter's result equals NumPy's on the same expression, and is bit-identical
# after canonicalize/cse/dce. (test_interpreter_property.py covers the same ideas on hand-built
# IR, op by op and dtype by dtype.)
import itertools
import linecache
import math
from dataclasses import dataclass
from typing import List, Tuple

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tessera import frontend, interpreter
from tessera._tessera import passes

import tessera.language as tl

DTYPES = {"fp32": np.float32, "fp16": np.float16, "i32": np.int32}
SHAPES = {"a": "tile", "b": "column", "c": "row", "s": "scalar"}


@dataclass
class Program:
    dtype: str
    tile: Tuple[int, int]
    size: Tuple[int, int]
    other: int
    exprs: List[Tuple[str, str]]  # (tl source, NumPy source) of v0, v1, ...
    store_mask: Tuple[str, str]
    seed: int


@st.composite
def programs(draw):
    dtype = draw(st.sampled_from(list(DTYPES)))
    tile = (draw(st.sampled_from([1, 2, 4])), draw(st.sampled_from([4, 8])))
    size = (draw(st.integers(1, 2 * tile[0] + 1)), draw(st.integers(1, 2 * tile[1] + 1)))
    names = list(SHAPES)
    constants = [2, -3, 1] if dtype == "i32" else [2, -3, 0.5]
    exprs = []
    used_names = []  # the variables the expression being drawn reads

    def operand():
        if draw(st.integers(0, 5)) == 0:  # a Python constant: weakly typed, keeps the dtype
            value = draw(st.sampled_from(constants))
            return repr(value), f"DT({value!r})"
        name = draw(st.sampled_from(names))
        used_names.append(name)
        return name, name

    float_max = "np.fmax" if dtype != "i32" else "np.maximum"
    float_min = "np.fmin" if dtype != "i32" else "np.minimum"
    for index in range(draw(st.integers(1, 5))):
        used_names.clear()
        (x, nx), (y, ny) = operand(), operand()
        kind = draw(st.sampled_from(["+", "-", "*", "max", "min", "where", "neg"]))
        if kind in "+-*":
            pair = (f"{x} {kind} {y}", f"{nx} {kind} {ny}")
        elif kind == "max":  # NaN loses, as NumPy's fmax
            pair = (f"tl.maximum({x}, {y})", f"{float_max}({nx}, {ny})")
        elif kind == "min":
            pair = (f"tl.minimum({x}, {y})", f"{float_min}({nx}, {ny})")
        elif kind == "neg":
            pair = (f"-{x}", f"-{nx}")
        else:
            (z, nz), (w, nw) = operand(), operand()
            pair = (f"tl.where({x} < {y}, {z}, {w})", f"np.where({nx} < {ny}, {nz}, {nw})")
        if not used_names:  # constants only: keep a runtime value in (a substring test would
            # take the "a" in "maximum" for the variable a)
            pair = (f"({pair[0]}) + a", f"({pair[1]}) + a")
        names.append(f"v{index}")
        exprs.append(pair)
    p, q = draw(st.sampled_from(names)), draw(st.sampled_from(names))
    store_mask = draw(st.sampled_from([("True", "True"), (f"{p} != {q}", f"{p} != {q}"),
                                       (f"{p} >= {q}", f"{p} >= {q}")]))
    return Program(dtype, tile, size, draw(st.sampled_from([0, 1, -3])), exprs, store_mask,
                   draw(st.integers(0, 2**32 - 1)))


_SOURCE = """\
def random_kernel(a_ptr, b_ptr, c_ptr, keep_ptr, out_ptr, s, M, N,
                  BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    r = rows[:, None]
    c_ = cols[None, :]
    inside = (r < M) & (c_ < N)
    keep = tl.load(keep_ptr + r * N + c_, mask=inside, other=0) != 0
    a = tl.load(a_ptr + r * N + c_, mask=inside & keep, other={other})
    b = tl.load(b_ptr + rows, mask=rows < M)[:, None]
    c = tl.load(c_ptr + cols, mask=cols < N)[None, :]
{body}
    tl.store(out_ptr + r * N + c_, {result}, mask=inside & ({store_mask}))
"""
_counter = itertools.count()


def define(program: Program):
    """The kernel as a Python function whose source inspect can read, as IPython's cells:
    the text is registered in linecache under a made-up file name."""
    body = "\n".join(f"    v{i} = {tl_source}" for i, (tl_source, _) in enumerate(program.exprs))
    source = _SOURCE.format(other=program.other, body=body, result=f"v{len(program.exprs) - 1}",
                            store_mask=program.store_mask[0])
    filename = f"<random kernel {next(_counter)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"tl": tl}
    exec(compile(source, filename, "exec"), namespace)
    return namespace["random_kernel"]


def build(program: Program):
    pointer = "*" + program.dtype
    signature = {"a_ptr": pointer, "b_ptr": pointer, "c_ptr": pointer, "keep_ptr": "*i8",
                 "out_ptr": pointer, "s": program.dtype, "M": "i32", "N": "i32"}
    return frontend.build_module(define(program), signature,
                                 {"BM": program.tile[0], "BN": program.tile[1]})


def inputs(program: Program):
    rng = np.random.default_rng(program.seed)
    dt = DTYPES[program.dtype]
    m, n = program.size

    def data(*shape):
        if program.dtype == "i32":
            small = rng.integers(-9, 10, shape)
            wide = rng.integers(-2**31, 2**31, shape)
            return np.where(rng.random(shape) < 0.6, small, wide).astype(dt)
        values = rng.standard_normal(shape) * np.exp2(rng.integers(-4, 5, shape))
        specials = rng.choice([np.inf, -np.inf, np.nan, 0.0], shape)
        return np.where(rng.random(shape) < 0.1, specials, values).astype(dt)

    keep = (rng.random((m, n)) < 0.7).astype(np.int8)
    return data(m, n), data(m), data(n), keep, data(1)[0]


def run(program: Program, module) -> np.ndarray:
    a, b, c, keep, s = inputs(program)
    poison = DTYPES[program.dtype](77)
    out = np.full(program.size, poison)
    grid = tuple(math.ceil(n / t) for n, t in zip(program.size, program.tile))
    interpreter.run(module, grid, [a, b, c, keep, out, s, *program.size])
    return out


def reference(program: Program) -> np.ndarray:
    """The same expressions on whole arrays in NumPy, in the same dtype."""
    a, b, c, keep, s = inputs(program)
    dt = DTYPES[program.dtype]
    scope = {"np": np, "DT": dt, "a": np.where(keep != 0, a, dt(program.other)),
             "b": b[:, None], "c": c[None, :], "s": s}
    with np.errstate(all="ignore"):
        for index, (_, np_source) in enumerate(program.exprs):
            scope[f"v{index}"] = eval(np_source, scope)
        result = np.broadcast_to(scope[f"v{len(program.exprs) - 1}"], program.size)
        mask = np.broadcast_to(eval(program.store_mask[1], scope), program.size)
    return np.where(mask, result, dt(77)).astype(dt)


PROPERTY = settings(max_examples=50, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(programs())
def test_random_frontend_programs_match_numpy(program):
    # assert_array_equal: NaN equals NaN, and -0.0 equals 0.0 (no op here tells them apart)
    np.testing.assert_array_equal(run(program, build(program)), reference(program))


@PROPERTY
@given(programs())
def test_random_frontend_programs_unchanged_by_cleanup_passes(program):
    module = build(program)
    cleaned = module.clone()
    passes.run(cleaned, ["canonicalize", "cse", "dce"])
    before, after = run(program, module), run(program, cleaned)
    np.testing.assert_array_equal(after.view(f"u{after.itemsize}"),
                                  before.view(f"u{before.itemsize}"))
