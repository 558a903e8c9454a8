"""The shape builtins through the whole compiler (front end, layout passes, codegen) for sm_80
and sm_90a: ptxas accepts the PTX with zero spills, and the generated LLVM IR, run thread by
thread on the CPU (tests/python/codegen/simt.py: shuffles, barriers and shared memory with
the hardware's semantics), gives NumPy's results on fresh random inputs for 1 and 4 warps.
"""
import os
import secrets
import sys

import ml_dtypes
import numpy as np
import pytest
import shape_op_kernels as K
from shape_op_kernels import bits, ragged_block, random_array, sortable
from tessera._tessera import codegen, passes
from tessera.compiler import compiler, ptxas
from test_tensor_surface import (float_specials, methods_inputs, methods_kernel,
                                 methods_reference, round_kernel, standard_kernel,
                                 toward_zero_reference)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "codegen"))
from simt import run_kernel  # noqa: E402

SIG = {np.float32: "fp32", np.float16: "fp16", np.int32: "i32", np.int64: "i64",
       np.uint8: "u8", np.int8: "i8"}


@pytest.fixture
def rng():
    seed = int(os.environ.get("CODEGEN_TEST_SEED") or secrets.randbits(32))
    print(f"numpy seed: {seed}")
    return np.random.default_rng(seed)


def compile_kernel(kernel, signature, constexprs, arch="sm_90a", num_warps=4):
    module = compiler.build_tile_ir(kernel, signature, constexprs, num_warps=num_warps)
    passes.run(module, compiler.PIPELINES["tgir"])
    return codegen.generate(module, arch=arch, num_warps=num_warps)


def simulate(kernel, signature, constexprs, args, num_warps):
    result = compile_kernel(kernel, signature, constexprs, num_warps=num_warps)
    run_kernel(result["unoptimized_llvm_ir"], (1,), args, num_warps, result["shared_bytes"])


def pointers(names, dtype):
    return {name: "*" + SIG[dtype] for name in names}


# ---- one case per builtin: (kernel, signature, constexprs) -----------------------------------

CASES = {
    "join_split": (K.join_split_kernel, {**pointers(["x_ptr", "y_ptr", "joined_ptr", "inter_ptr",
                                                     "cat_ptr", "a_ptr", "b_ptr"], np.float32),
                                         "M": "i32", "N": "i32"}, {"BM": 16, "BN": 32}),
    "scalar_join": (K.scalar_join_kernel,
                    pointers(["x_ptr", "out_ptr", "first_ptr", "second_ptr"], np.int8), {}),
    "gather": (K.gather_kernel, {"src_ptr": "*fp16", "idx_ptr": "*i32", "out_ptr": "*fp16",
                                 "M": "i32", "N": "i32"},
               {"BM": 16, "BN": 32, "BI": 16, "AXIS": 0}),
    "histogram": (K.histogram_kernel, {**pointers(["x_ptr", "out_ptr", "masked_ptr"], np.int32),
                                       "n": "i32"}, {"BLOCK": 256, "BINS": 64}),
    "flip": (K.flip_kernel, pointers(["x_ptr", "out0_ptr", "out1_ptr"], np.float32),
             {"BM": 16, "BN": 64}),
    "sort": (K.sort_kernel, {**pointers(["x_ptr", "asc_ptr", "desc_ptr"], np.float32),
                             "M": "i32", "N": "i32"},
             {"BM": 8, "BN": 128, "OTHER": float("inf")}),
    "topk": (K.topk_kernel, {"x_ptr": "*fp16", "out_ptr": "*fp32", "M": "i32", "N": "i32"},
             {"BM": 8, "BN": 128, "K": 8, "OTHER": -float("inf")}),
    "bitonic_merge": (K.bitonic_kernel, pointers(["x_ptr", "out_ptr"], np.float32),
                      {"BM": 4, "BN": 64, "DESCENDING": True}),
    "methods": (methods_kernel, pointers(["x_ptr", "y_ptr", "out_ptr"], np.int32),
                {"BM": 4, "BN": 8}),
    "standard": (standard_kernel, {**pointers(["x_ptr", "y_ptr", "out_ptr", "swz_ptr"],
                                              np.int32), "n": "i32"}, {"BLOCK": 16, "G": 3}),
    "to_rtz": (round_kernel, {"x_ptr": "*fp32", "rtz_ptr": "*bf16", "rtne_ptr": "*bf16",
                              "n": "i32"}, {"BLOCK": 256}),
}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_ptxas_accepts_without_spills(name, arch):
    kernel, signature, constexprs = CASES[name]
    ptx = compile_kernel(kernel, signature, constexprs, arch=arch)["ptx"]
    if ptxas.find_ptxas() is None:
        pytest.skip("ptxas not found: PTX not assembled")
    report = ptxas.assemble(ptx, arch).report
    assert report["spill_stores"] == 0 and report["spill_loads"] == 0, report


# ---- simulated results -------------------------------------------------------------------


@pytest.mark.parametrize("num_warps", [1, 4])
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.int64])
def test_join_split_interleave_cat(rng, num_warps, dtype):
    m, n, bm, bn = 13, 29, 16, 32
    x, y = random_array(rng, (m, n), dtype), random_array(rng, (m, n), dtype)
    joined = np.zeros((bm, bn, 2), dtype)
    inter, cat = np.zeros((bm, 2 * bn), dtype), np.zeros((2 * bm, bn), dtype)
    a, b = np.zeros((bm, bn), dtype), np.zeros((bm, bn), dtype)
    signature = {**pointers(["x_ptr", "y_ptr", "joined_ptr", "inter_ptr", "cat_ptr", "a_ptr",
                             "b_ptr"], dtype), "M": "i32", "N": "i32"}
    simulate(K.join_split_kernel, signature, {"BM": bm, "BN": bn},
             [x, y, joined, inter, cat, a, b, m, n], num_warps)
    xb, yb = ragged_block(x, bm, bn), ragged_block(y, bm, bn)
    np.testing.assert_array_equal(bits(joined), bits(np.stack([xb, yb], -1)))
    np.testing.assert_array_equal(bits(inter), bits(np.stack([xb, yb], -1).reshape(bm, -1)))
    np.testing.assert_array_equal(bits(cat), bits(np.concatenate([xb, yb], 0)))
    np.testing.assert_array_equal(bits(a), bits(yb))
    np.testing.assert_array_equal(bits(b), bits(xb))


@pytest.mark.parametrize("num_warps", [1, 4])
def test_join_and_split_of_scalars(rng, num_warps):
    x = random_array(rng, (2,), np.int8)
    out, first, second = np.zeros(2, np.int8), np.zeros(1, np.int8), np.zeros(1, np.int8)
    kernel, signature, constexprs = CASES["scalar_join"]
    simulate(kernel, signature, constexprs, [x, out, first, second], num_warps)
    np.testing.assert_array_equal(out, x[::-1])
    assert (first[0], second[0]) == (x[1], x[0])


@pytest.mark.parametrize("num_warps", [1, 4])
@pytest.mark.parametrize("axis", [0, 1])
def test_gather(rng, num_warps, axis):
    m, n, bm, bn, bi = 11, 30, 16, 32, 16
    src = random_array(rng, (m, n), np.float16)
    size, shape = (bm, bn)[axis], ((bi, bn) if axis == 0 else (bm, bi))
    index = rng.integers(-2, size + 2, shape).astype(np.int32)  # some out of range: 0
    out = np.full(shape, 7, np.float16)
    kernel, signature, _ = CASES["gather"]
    simulate(kernel, signature, {"BM": bm, "BN": bn, "BI": bi, "AXIS": axis},
             [src, index, out, m, n], num_warps)
    ref = np.take_along_axis(ragged_block(src, bm, bn), np.clip(index, 0, size - 1), axis)
    ref[(index < 0) | (index >= size)] = 0
    np.testing.assert_array_equal(bits(out), bits(ref))


@pytest.mark.parametrize("num_warps", [1, 4])
def test_histogram(rng, num_warps):
    x = rng.integers(-4, 70, 256).astype(np.int32)
    n = int(rng.integers(0, 257))
    out, masked = np.zeros(64, np.int32), np.zeros(64, np.int32)
    kernel, signature, constexprs = CASES["histogram"]
    simulate(kernel, signature, constexprs, [x, out, masked, n], num_warps)
    np.testing.assert_array_equal(out, np.bincount(x[(x >= 0) & (x < 64)], minlength=64))
    head = x[:n]
    np.testing.assert_array_equal(masked, np.bincount(head[(head >= 0) & (head < 64)],
                                                      minlength=64))


@pytest.mark.parametrize("num_warps", [1, 4])
def test_flip(rng, num_warps):
    x = random_array(rng, (16, 64), np.float32)
    out0, out1 = np.zeros_like(x), np.zeros_like(x)
    kernel, signature, constexprs = CASES["flip"]
    simulate(kernel, signature, constexprs, [x, out0, out1], num_warps)
    np.testing.assert_array_equal(bits(out0), bits(x[::-1]))
    np.testing.assert_array_equal(bits(out1), bits(x[:, ::-1]))


@pytest.mark.parametrize("num_warps", [1, 4])
def test_sort(rng, num_warps):
    m, n, bm, bn = 7, 100, 8, 128
    x = sortable(rng, (m, n), np.float32)
    asc, desc = np.zeros((bm, bn), np.float32), np.zeros((bm, bn), np.float32)
    kernel, signature, constexprs = CASES["sort"]
    simulate(kernel, signature, constexprs, [x, asc, desc, m, n], num_warps)
    block = np.sort(ragged_block(x, bm, bn, np.inf), axis=1)
    np.testing.assert_array_equal(asc, block)
    np.testing.assert_array_equal(desc, block[:, ::-1])


@pytest.mark.parametrize("num_warps", [1, 4])
def test_topk(rng, num_warps):
    m, n, bm, bn, k = 5, 120, 8, 128, 8
    x = sortable(rng, (m, n), np.float16)
    out = np.zeros((bm, k), np.float32)  # fp16 comes back as fp32, as Triton's
    kernel, signature, constexprs = CASES["topk"]
    simulate(kernel, signature, constexprs, [x, out, m, n], num_warps)
    block = ragged_block(x, bm, bn, -np.inf).astype(np.float32)
    np.testing.assert_array_equal(out, np.sort(block, axis=1)[:, ::-1][:, :k])


@pytest.mark.parametrize("num_warps", [1, 4])
def test_bitonic_merge(rng, num_warps):
    halves = np.sort(sortable(rng, (4, 64), np.float32), axis=1)
    x = np.concatenate([halves[:, :32], halves[:, 32:][:, ::-1]], axis=1)
    out = np.zeros_like(x)
    kernel, signature, constexprs = CASES["bitonic_merge"]
    simulate(kernel, signature, constexprs, [x, out], num_warps)
    np.testing.assert_array_equal(out, np.sort(x, axis=1)[:, ::-1])


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")  # 70000 -> fp16 inf
@pytest.mark.parametrize("num_warps", [1, 4])
@pytest.mark.parametrize("dtype, sig", [(np.float16, "*fp16"), (ml_dtypes.bfloat16, "*bf16")])
def test_downcast_toward_zero(rng, num_warps, dtype, sig):
    n = 200
    x = float_specials(rng, n)
    rtz, rtne = np.zeros(n, dtype), np.zeros(n, dtype)
    signature = {"x_ptr": "*fp32", "rtz_ptr": sig, "rtne_ptr": sig, "n": "i32"}
    simulate(round_kernel, signature, {"BLOCK": 256}, [x, rtz, rtne, n], num_warps)
    finite = ~np.isnan(x)
    ref = toward_zero_reference(x, dtype)
    np.testing.assert_array_equal(rtz.view(np.uint16)[finite], ref.view(np.uint16)[finite])
    assert np.isnan(rtz.astype(np.float32)[~finite]).all()


@pytest.mark.parametrize("num_warps", [1, 4])
def test_tensor_methods(rng, num_warps):
    x, y = methods_inputs(rng)
    out = np.zeros((20,) + x.shape, np.int32)
    kernel, signature, constexprs = CASES["methods"]
    simulate(kernel, signature, constexprs, [x, y, out], num_warps)
    for index, ref in enumerate(methods_reference(x, y)):
        np.testing.assert_array_equal(out[index], ref, err_msg=f"result {index}")
