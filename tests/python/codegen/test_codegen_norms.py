"""tessera.ops' LayerNorm backward (row reductions, two loop-carried fp32 accumulators, the
partial rows of dw and db) and its `sum_partials`, compiled as the GPU wrappers launch them and
run thread by thread on the CPU (simt.py) against float64 NumPy.

Each kernel runs on the smallest launch that still takes every path of its code: the backward
over a ragged row count (programs of 3 and 2 loop steps, columns masked past n_cols), with
each program's partial rows checked on their own; `sum_partials` with its real tile (8 warps,
1024 x 2) over a stack of two matrices whose rows need two loop steps and whose last column
pair is half masked. (Summing the backward's own 3 x 384 partials, as the GPU does, took 384
programs of 256 threads: 40 s in the interpreter for nothing a small launch does not show.)

Regression: tests/gpu/test_norms.py once saw LayerNorm's dw at half PyTorch's. The generated
code was right (as this test shows); the test's reference had accumulated RMSNorm's dw into the
same `w.grad` first.
"""
import numpy as np
import pytest
from simt import run_kernel
from tessera._tessera import codegen, passes
from tessera.compiler import compiler
from tessera.ops import norms


def generate(fn, signature, constexprs, num_warps, ints):
    """The kernel's LLVM IR, specialized as the launcher does: pointers (16-byte aligned) and
    the int arguments whose values (``ints``) are multiples of 16 are marked divisible by 16."""
    divisible = [name for name, ty in signature.items() if ty.startswith("*")]
    divisible += [name for name, value in ints.items() if value % 16 == 0]
    module = compiler.build_tile_ir(fn, signature, constexprs, divisibility_16=divisible,
                                    num_warps=num_warps)
    passes.run(module, compiler.PIPELINES["tgir"])
    return codegen.generate(module, arch="sm_90a", num_warps=num_warps)


def test_layer_norm_backward_matches_float64():
    rng = np.random.default_rng(5)
    # 16 rows over 3 programs: program 0 takes rows 0, 3, ..., 15 and the others five each, so
    # the accumulators are carried over 6 and 5 steps; 384 columns in a 512-wide tile.
    n_rows, n_cols, programs, eps = 16, 384, 3, 1e-5
    config = norms.backward_config(n_cols, reductions_per_row=4)  # as layer_norm_backward
    assert (config["BLOCK_ROWS"], config["BLOCK_COLS"], config["num_warps"]) == (1, 512, 1)
    x = rng.standard_normal((n_rows, n_cols)).astype(np.float32)
    dy = rng.standard_normal((n_rows, n_cols)).astype(np.float32)
    w = (1 + 0.5 * rng.standard_normal(n_cols)).astype(np.float32)
    dx = np.zeros_like(x)
    dw_partials, db_partials = (np.full((programs, n_cols), np.nan, np.float32)
                                for _ in range(2))
    signature = {"dy_ptr": "*fp32", "x_ptr": "*fp32", "w_ptr": "*fp32", "dx_ptr": "*fp32",
                 "dw_partial_ptr": "*fp32", "db_partial_ptr": "*fp32", "n_rows": "i32",
                 "n_cols": "i32", "eps": "fp32"}
    tiles = {"BLOCK_ROWS": config["BLOCK_ROWS"], "BLOCK_COLS": config["BLOCK_COLS"]}
    result = generate(norms.layer_norm_bwd.fn, signature, tiles, config["num_warps"],
                      {"n_rows": n_rows, "n_cols": n_cols})
    run_kernel(result["unoptimized_llvm_ir"], (programs,),
               [dy.reshape(-1), x.reshape(-1), w, dx.reshape(-1), dw_partials.reshape(-1),
                db_partials.reshape(-1), n_rows, n_cols, eps],
               config["num_warps"], result["shared_bytes"])

    x64, dy64 = x.astype(np.float64), dy.astype(np.float64)
    centered = x64 - x64.mean(axis=1, keepdims=True)
    rstd = 1 / np.sqrt((centered * centered).mean(axis=1, keepdims=True) + eps)
    x_hat, g = centered * rstd, dy64 * w
    dx_ref = rstd * (g - x_hat * (g * x_hat).mean(axis=1, keepdims=True)
                     - g.mean(axis=1, keepdims=True))
    assert np.linalg.norm(dx - dx_ref) / np.linalg.norm(dx_ref) < 1e-5
    for pid in range(programs):  # a program's partial rows sum the rows it visited
        rows = slice(pid, n_rows, programs)
        for out, ref in ((dw_partials[pid], (dy64 * x_hat)[rows].sum(axis=0)),
                         (db_partials[pid], dy64[rows].sum(axis=0))):
            assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 1e-5, pid


# (partial rows, columns): both multiples of 16 (the specialization the GPU sees for LayerNorm
# rows; the rows still take two loop steps), then neither (the last column pair half masked).
@pytest.mark.parametrize("n_partials, n_cols", [(1040, 16), (1029, 5)])
def test_sum_partials_matches_float64(n_partials, n_cols):
    rng = np.random.default_rng(n_cols)
    partials_config = dict(norms.PARTIALS_CONFIG)  # what reduce_partials launches
    partials_warps = partials_config.pop("num_warps")
    block_rows, block_cols = partials_config["BLOCK_ROWS"], partials_config["BLOCK_COLS"]
    assert block_rows < n_partials < 2 * block_rows
    signature = {"partial_ptr": "*fp32", "out_ptr": "*fp32", "n_partials": "i32",
                 "n_cols": "i32"}
    summed = generate(norms.sum_partials.fn, signature, partials_config, partials_warps,
                      {"n_partials": n_partials, "n_cols": n_cols})
    # Two stacked partial matrices (dw's and db's), summed by one launch as
    # layer_norm_backward does: grid axis 1 picks the matrix.
    stacked = rng.standard_normal((2, n_partials, n_cols)).astype(np.float32)
    sums = np.full((2, n_cols), np.nan, np.float32)  # an access past either raises (simt.py)
    run_kernel(summed["unoptimized_llvm_ir"], (-(-n_cols // block_cols), 2),
               [stacked.reshape(-1), sums.reshape(-1), n_partials, n_cols], partials_warps,
               summed["shared_bytes"])
    ref = stacked.astype(np.float64).sum(axis=1)
    assert np.linalg.norm(sums - ref) / np.linalg.norm(ref) < 1e-5
