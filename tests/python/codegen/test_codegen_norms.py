"""tessera.ops' LayerNorm backward (row reductions, two loop-carried fp32 accumulators, the
partial rows of dw and db) and its `sum_partials`, compiled as the GPU wrappers launch them and
run thread by thread on the CPU (simt.py) against float64 NumPy.

Regression: tests/gpu/test_norms.py once saw LayerNorm's dw at half PyTorch's. The generated
code was right (as this test shows); the test's reference had accumulated RMSNorm's dw into the
same `w.grad` first.
"""
import numpy as np
from simt import run_kernel
from tessera._tessera import codegen, passes
from tessera.compiler import compiler
from tessera.ops import norms


def generate(fn, signature, constexprs, num_warps):
    """The kernel's LLVM IR, specialized as on the GPU (pointers and ints divisible by 16)."""
    divisible = [name for name, ty in signature.items() if ty != "fp32"]
    module = compiler.build_tile_ir(fn, signature, constexprs, divisibility_16=divisible,
                                    num_warps=num_warps)
    passes.run(module, compiler.PIPELINES["tgir"])
    return codegen.generate(module, arch="sm_90a", num_warps=num_warps)


def test_layer_norm_backward_matches_float64():
    rng = np.random.default_rng(5)
    n_rows, n_cols, programs, eps = 48, 384, 3, 1e-5  # 48 row blocks over 3 programs
    config = norms.backward_config(n_cols, reductions_per_row=4)  # as layer_norm_backward
    assert (config["BLOCK_ROWS"], config["BLOCK_COLS"], config["num_warps"]) == (1, 512, 1)
    x = rng.standard_normal((n_rows, n_cols)).astype(np.float32)
    dy = rng.standard_normal((n_rows, n_cols)).astype(np.float32)
    w = (1 + 0.5 * rng.standard_normal(n_cols)).astype(np.float32)
    dx = np.zeros_like(x)
    dw_partials, db_partials = (np.zeros((programs, n_cols), np.float32) for _ in range(2))
    signature = {"dy_ptr": "*fp32", "x_ptr": "*fp32", "w_ptr": "*fp32", "dx_ptr": "*fp32",
                 "dw_partial_ptr": "*fp32", "db_partial_ptr": "*fp32", "n_rows": "i32",
                 "n_cols": "i32", "eps": "fp32"}
    tiles = {"BLOCK_ROWS": config["BLOCK_ROWS"], "BLOCK_COLS": config["BLOCK_COLS"]}
    result = generate(norms.layer_norm_bwd.fn, signature, tiles, config["num_warps"])
    run_kernel(result["unoptimized_llvm_ir"], (programs,),
               [dy.reshape(-1), x.reshape(-1), w, dx.reshape(-1), dw_partials.reshape(-1),
                db_partials.reshape(-1), n_rows, n_cols, eps],
               config["num_warps"], result["shared_bytes"])

    partial_signature = {"partial_ptr": "*fp32", "out_ptr": "*fp32", "n_partials": "i32",
                         "n_cols": "i32"}
    partials_config = dict(norms.PARTIALS_CONFIG)  # what reduce_partials launches
    partials_warps = partials_config.pop("num_warps")
    block_cols = partials_config["BLOCK_COLS"]
    summed = generate(norms.sum_partials.fn, partial_signature, partials_config, partials_warps)
    # Both partial matrices stacked, summed by one launch as layer_norm_backward does.
    stacked, sums = np.stack([dw_partials, db_partials]), np.zeros((2, n_cols), np.float32)
    run_kernel(summed["unoptimized_llvm_ir"], (n_cols // block_cols, 2),
               [stacked.reshape(-1), sums.reshape(-1), programs, n_cols], partials_warps,
               summed["shared_bytes"])
    dw, db = sums

    x64, dy64 = x.astype(np.float64), dy.astype(np.float64)
    centered = x64 - x64.mean(axis=1, keepdims=True)
    rstd = 1 / np.sqrt((centered * centered).mean(axis=1, keepdims=True) + eps)
    x_hat, g = centered * rstd, dy64 * w
    dx_ref = rstd * (g - x_hat * (g * x_hat).mean(axis=1, keepdims=True)
                     - g.mean(axis=1, keepdims=True))
    for out, ref in ((dx, dx_ref), (dw, (dy64 * x_hat).sum(axis=0)), (db, dy64.sum(axis=0))):
        assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 1e-5
