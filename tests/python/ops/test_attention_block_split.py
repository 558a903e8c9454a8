"""tessera.ops' fused-attention kernels split their walk into a masked loop (the blocks that
cross S or the causal diagonal) and an unmasked one (blocks inside S, seen whole by every row).
These run the forward, dK/dV and dQ kernels directly through the interpreter with block shapes
the wrappers' defaults do not cover (BLOCK_M < BLOCK_N, BLOCK_M > BLOCK_N, equal), at S where
every unmasked loop is empty, S a multiple of every block, and ragged S, against float64.

The inputs are views of arrays padded past S with NaN rows, and the outputs are poisoned NaN
arrays with padding too: an unmasked load past S (a block wrongly in the unmasked loop) or a
key wrongly visible turns results into NaN or wrong values, a store past S shows in the pad.
"""
import ml_dtypes
import numpy as np
import pytest

import tessera.ops.flash_attention as fa

PAD = 40  # NaN rows past S in every input and output


def padded(x: np.ndarray) -> tuple:
    """(view, base): x as the first S rows of a (B, H, S + PAD, D) array whose pad is NaN."""
    B, H, S, D = x.shape
    base = np.full((B, H, S + PAD, D), np.nan, x.dtype)
    base[:, :, :S] = x
    return base[:, :, :S], base


def strides(x: np.ndarray) -> tuple:
    return tuple(s // x.itemsize for s in x.strides[:3])


def reference(q, k, v, do, causal, scale):
    """O, lse2, dQ, dK, dV in float64 from the full score matrix."""
    S = q.shape[2]
    s = q @ k.swapaxes(-1, -2) * scale
    if causal:
        s = np.where(np.tril(np.ones((S, S), bool)), s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    l = p.sum(-1, keepdims=True)
    p /= l
    dp = do @ v.swapaxes(-1, -2)
    ds = p * (dp - (p * dp).sum(-1, keepdims=True))
    return {"o": p @ v, "lse": (m + np.log(l))[..., 0] / np.log(2), "dq": ds @ k * scale,
            "dk": ds.swapaxes(-1, -2) @ q * scale, "dv": p.swapaxes(-1, -2) @ do}


def run(S, D, causal, dtype, block_m, block_n, reload=False, B=1, H=2, seed=0):
    """Runs the three kernels with the given blocks; returns {name: (result, base, ref)}."""
    rng = np.random.default_rng(seed)
    q, k, v, do = (padded(rng.standard_normal((B, H, S, D)).astype(dtype))[0]
                   for _ in range(4))
    (o, o_base), (dq, dq_base), (dk, dk_base), (dv, dv_base) = (
        padded(np.full((B, H, S, D), np.nan, dtype)) for _ in range(4))
    lse = np.full((B, H, S), np.nan, np.float32)
    scale = (0.5 + rng.random()) * D ** -0.5
    meta = dict(D=D, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal, RELOAD=reload,
                num_warps=4)
    fa.attention_fwd_kernel[(-(-S // block_m), B * H)](
        q, k, v, o, lse, scale * fa.LOG2E, H, S, *strides(q), *strides(k), *strides(v),
        *strides(o), **meta)
    delta = (o.astype(np.float32) * do.astype(np.float32)).sum(-1)
    common = (lse, delta, scale, scale * fa.LOG2E, H, S, *strides(q), *strides(k),
              *strides(v), *strides(do))
    fa.attention_bwd_dkdv_kernel[(-(-S // block_n), B * H)](
        q, k, v, do, dk, dv, *common, *strides(dk), *strides(dv), **meta)
    fa.attention_bwd_dq_kernel[(-(-S // block_m), B * H)](
        q, k, v, do, dq, *common, *strides(dq), **meta)
    ref = reference(*(x.astype(np.float64) for x in (q, k, v, do)), causal, scale)
    return {"o": (o, o_base, ref["o"]), "lse": (lse, None, ref["lse"]),
            "dq": (dq, dq_base, ref["dq"]), "dk": (dk, dk_base, ref["dk"]),
            "dv": (dv, dv_base, ref["dv"])}


def check(results, bound):
    for name, (got, base, ref) in results.items():
        got = got.astype(np.float64)
        assert np.isfinite(got).all(), f"{name}: NaN or inf (a load past S?)"
        if base is not None:  # the kernels write rows < S only
            assert np.isnan(base[:, :, got.shape[2]:].astype(np.float32)).all(), name
        if name == "lse":
            assert np.abs(got - ref).max() <= 1e-3 * max(1.0, np.abs(ref).max()), name
            continue
        norm = np.linalg.norm(ref)
        error = np.linalg.norm(got - ref) / (norm if norm else 1.0)
        assert error <= bound, f"{name}: relative error {error:.2e} > {bound}"


# (BLOCK_M, BLOCK_N): equal, the causal diagonal over several key blocks (forward, dQ) or
# several query blocks (dK/dV), both ways.
BLOCKS = [(16, 16), (64, 16), (16, 64), (32, 64)]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("blocks", BLOCKS, ids=lambda b: f"{b[0]}x{b[1]}")
@pytest.mark.parametrize("S", [5, 83, 128])
def test_split_walks_match_float64(interpret, S, blocks, causal):
    # S = 5: below every block, every unmasked loop is empty; S = 128: a multiple of every
    # block, no block crosses S; S = 83: both loops run in most programs.
    results = run(S, 32, causal, np.float16, *blocks, seed=S + 7 * causal)
    check(results, 1e-2)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_split_walks_reload_and_float32(interpret, causal):
    # RELOAD re-reads Q (or K, V / Q, dO) in the unmasked loop too; float32 runs in tf32.
    check(run(70, 16, causal, np.float32, 32, 16, reload=True, seed=3), 1e-2)
    check(run(70, 16, causal, ml_dtypes.bfloat16, 16, 32, reload=True, seed=4),
          2e-2)


def test_unmasked_loop_is_all_that_runs_when_s_divides(interpret):
    # Non-causal with S a multiple of BLOCK_N: split = S, so the masked loop is empty and the
    # unmasked one alone gives the whole result (also with two batches and three heads).
    check(run(96, 64, False, np.float16, 32, 32, B=2, H=3, seed=5), 1e-2)
