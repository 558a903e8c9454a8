"""tessera.ops' masked attention on the CPU: its kernels (live-block table, forward, dK/dV and
dQ with dBias) through the interpreter against a float64 NumPy reference with gradients by
hand: random masks with all, ~50% and ~10% of 128-blocks live and random element-level masks,
bias broadcast along each dim, grouped-query heads, lengths that are multiples of no block,
fully masked rows (0 output, 0 gradients, no NaN); then the torch op on CPU tensors
(autograd, torch.compile(fullgraph=True), opcheck).

Bounds as the dense attention's tests: O ≤ 5e-3 (fp16, tf32), 1e-2 (bf16), gradients twice.
"""
import ml_dtypes
import numpy as np
import pytest
from tessera.ops import attention_masked_backward, attention_masked_forward
from tessera.ops.masked_attention import SUPER, block_table
from tessera.testing import relative_error

DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}
BOUNDS = {"float16": (5e-3, 1e-2), "bfloat16": (1e-2, 2e-2), "float32": (5e-3, 1e-2)}


def reference(q, k, v, do, mask, bias, causal, sm_scale):
    """(O, dQ, dK, dV, dS) in float64 with grouped heads repeated; rows seeing no key: 0."""
    G = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, G, 1), np.repeat(v, G, 1)
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * sm_scale
    if bias is not None:
        s = s + bias
    visible = np.ones(s.shape, bool)
    if mask is not None:
        visible &= mask
    if causal:
        visible &= np.tril(np.ones(s.shape[-2:], bool))
    s = np.where(visible, s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - np.where(np.isfinite(m), m, 0))
    total = p.sum(-1, keepdims=True)
    p = p / np.where(total > 0, total, 1)
    dp = np.matmul(do, np.swapaxes(v, -1, -2))
    ds = p * (dp - (p * dp).sum(-1, keepdims=True))
    dk = np.matmul(np.swapaxes(ds, -1, -2), q) * sm_scale
    dv = np.matmul(np.swapaxes(p, -1, -2), do)
    fold = lambda x: x.reshape(x.shape[0], -1, G, *x.shape[2:]).sum(2)  # noqa: E731
    return np.matmul(p, v), np.matmul(ds, k) * sm_scale, fold(dk), fold(dv), ds


def block_mask(rng, shape, live_fraction, element_fraction=1.0):
    """A bool mask whose SUPER x SUPER blocks are live with `live_fraction` (then each element
    true with `element_fraction`)."""
    *lead, Sq, Sk = shape
    nq, nk = -(-Sq // SUPER), -(-Sk // SUPER)
    blocks = rng.random((*lead, nq, nk)) < live_fraction
    dense = np.repeat(np.repeat(blocks, SUPER, -2), SUPER, -1)[..., :Sq, :Sk]
    return dense & (rng.random(shape) < element_fraction)


def run_case(Bq, Hq, Hkv, Sq, Sk, D, dtype_name, mask_shape, bias_shape, causal, seed,
             live=1.0, element=0.5, dead_rows=()):
    rng = np.random.default_rng(seed)
    dtype = DTYPES[dtype_name]
    q = rng.standard_normal((Bq, Hq, Sq, D)).astype(dtype)
    k, v = (rng.standard_normal((Bq, Hkv, Sk, D)).astype(dtype) for _ in range(2))
    do = rng.standard_normal(q.shape).astype(dtype)
    mask = None if mask_shape is None else block_mask(rng, mask_shape, live, element)
    for row in dead_rows:
        mask[..., row, :] = False
    bias = None if bias_shape is None else rng.standard_normal(bias_shape).astype(dtype)
    sm_scale = (0.5 + rng.random()) * D ** -0.5
    o, lse = attention_masked_forward(q, k, v, mask, bias, causal, sm_scale)
    dq, dk, dv, dbias = attention_masked_backward(q, k, v, o, lse, do, mask, bias, causal,
                                                  sm_scale, bias_grad=bias is not None)
    ref = reference(*(x.astype(np.float64) for x in (q, k, v, do)), mask,
                    None if bias is None else bias.astype(np.float64), causal, sm_scale)
    outputs = [o, dq, dk, dv]
    for x in outputs:
        assert np.isfinite(x.astype(np.float64)).all()
    errors = {name: relative_error(x.astype(np.float64), r)
              for name, x, r in zip(("o", "dq", "dk", "dv"), outputs, ref)}
    if bias is not None:
        axes = tuple(i for i, n in enumerate(bias_shape) if n == 1)
        expected = ref[4].sum(axis=axes, keepdims=True)
        assert dbias.shape == bias.shape and dbias.dtype == bias.dtype
        errors["dbias"] = relative_error(dbias.astype(np.float64), expected)
    return errors, (o, dq, ref)


def assert_within(errors, dtype_name):
    bound_o, bound_grad = BOUNDS[dtype_name]
    for name, error in errors.items():
        assert error < (bound_o if name == "o" else bound_grad), (name, errors)


@pytest.mark.parametrize("live", [1.0, 0.5, 0.1], ids=["dense", "half", "tenth"])
def test_block_sparse_masks_match_float64(interpret, live):
    # 300 x 330 keys: 3 x 3 blocks of 128, neither length a multiple of any tile.
    errors, _ = run_case(2, 2, 2, 300, 330, 32, "float16", (2, 2, 300, 330), None, False,
                         seed=int(live * 10), live=live, element=0.7)
    assert_within(errors, "float16")


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16", "float32"])
def test_element_masks_with_causal_and_gqa(interpret, dtype_name):
    # 4 query heads on 2 key/value heads; a mask shared by the batch; causal on top.
    errors, _ = run_case(2, 4, 2, 150, 150, 64, dtype_name, (1, 4, 150, 150), (2, 4, 150, 150),
                         True, seed=3, element=0.6)
    assert_within(errors, dtype_name)


@pytest.mark.parametrize("bias_shape", [(1, 3, 97, 140), (2, 1, 97, 140), (2, 3, 1, 140),
                                        (1, 1, 1, 140), (2, 3, 97, 140)],
                         ids=["batch", "heads", "rows", "all", "none"])
def test_bias_broadcasts_and_its_gradient_sums(interpret, bias_shape):
    errors, _ = run_case(2, 3, 1, 97, 140, 32, "float32", (2, 1, 1, 140), bias_shape, False,
                         seed=sum(bias_shape), element=0.8)
    assert_within(errors, "float32")


def test_fully_masked_rows_give_zeros_not_nan(interpret):
    dead = (0, 5, 129)
    errors, (o, dq, _) = run_case(1, 2, 2, 140, 200, 16, "float32", (1, 2, 140, 200),
                                  (1, 2, 140, 200), False, seed=7, dead_rows=dead)
    assert_within(errors, "float32")
    assert (o[:, :, list(dead)] == 0).all() and (dq[:, :, list(dead)] == 0).all()


def test_bias_only_and_causal_only(interpret):
    errors, _ = run_case(1, 2, 2, 200, 200, 32, "float16", None, (1, 2, 1, 200), True, seed=11)
    assert_within(errors, "float16")


def test_block_table_classes_dead_partial_full(interpret):
    rng = np.random.default_rng(5)
    mask = np.ones((1, 1, 300, 260), bool)
    mask[..., :128, 128:256] = False            # a dead block
    mask[..., 130, 5] = False                   # makes block (1, 0) partial
    table = block_table(mask, (1, 1, 300, 64), 260, False)[0]
    # rows 256.. and keys 256.. cross the ends: partial; the rest as set above.
    expected = np.array([[2, 0, 1], [1, 2, 1], [1, 1, 1]])
    np.testing.assert_array_equal(table, expected)
    causal = block_table(None, (1, 1, 256, 64), 256, True)[0]
    np.testing.assert_array_equal(causal, [[1, 0], [2, 1]])
    random = rng.random((2, 1, 130, 130)) < 0.5
    assert block_table(random, (2, 1, 130, 64), 130, False).shape == (2, 2, 2)


def test_rejects_bad_arguments(interpret):
    q = np.zeros((1, 4, 8, 32), np.float16)
    kv = np.zeros((1, 3, 8, 32), np.float16)
    with pytest.raises(ValueError, match="attention_masked_forward: k, v .* divides q's 4"):
        attention_masked_forward(q, kv, kv)
    with pytest.raises(ValueError, match=r"mask must be \(B\|1, Hq\|1, Sq\|1, Sk\)"):
        attention_masked_forward(q, q, q, mask=np.ones((1, 2, 8, 8), bool))
    with pytest.raises(ValueError, match="attention_masked_forward: mask must be bool"):
        attention_masked_forward(q, q, q, mask=np.ones((1, 1, 1, 8), np.float16))
    with pytest.raises(ValueError, match="bias must be float16 or bfloat16 or float32"):
        attention_masked_forward(q, q, q, bias=np.ones((1, 1, 1, 8), np.int32))


# ---- The PyTorch integration, on CPU tensors ----

def torch_reference(q, k, v, mask, bias, causal, scale):
    """O and d(O.sum())/d(q, k, v, bias) by float64 autograd of the plain formula."""
    import torch
    q, k, v, bias = (x.detach().double().requires_grad_() for x in (q, k, v, bias))
    G = q.shape[1] // k.shape[1]
    s = q @ k.repeat_interleave(G, 1).transpose(-1, -2) * scale + bias
    visible = mask & torch.ones(s.shape[-2:], dtype=torch.bool).tril() if causal else mask
    p = torch.softmax(s.masked_fill(~visible, float("-inf")), -1).nan_to_num(0.0)
    o = p @ v.repeat_interleave(G, 1)
    o.sum().backward()
    return o.detach(), q.grad, k.grad, v.grad, bias.grad


def torch_rel(x, ref):
    return ((x.detach().double() - ref).norm() / ref.norm()).item()


def torch_case(torch, dtype, gen):
    B, Hq, Hkv, S, D = 2, 4, 2, 70, 32
    q = torch.randn((B, Hq, S, D), generator=gen).to(dtype).requires_grad_()
    k, v = (torch.randn((B, Hkv, S, D), generator=gen).to(dtype).requires_grad_()
            for _ in range(2))
    mask = torch.rand((B, 1, S, S), generator=gen) < 0.6
    mask[0, 0, 3] = False  # a row that sees nothing
    bias = torch.randn((1, Hq, 1, S), generator=gen).to(dtype).requires_grad_()
    return q, k, v, mask, bias


@pytest.mark.parametrize("dtype_name,causal", [("bfloat16", True), ("float32", False)])
def test_torch_compile_fullgraph_forward_and_backward(dtype_name, causal):
    torch = pytest.importorskip("torch")
    from tessera.ops import attention_masked
    dtype = getattr(torch, dtype_name)
    q, k, v, mask, bias = torch_case(torch, dtype, torch.Generator().manual_seed(3))
    compiled = torch.compile(attention_masked, fullgraph=True)  # a graph break raises
    o = compiled(q, k, v, mask=mask, bias=bias, causal=causal)
    o.sum().backward()
    ref = torch_reference(q, k, v, mask, bias, causal, 32 ** -0.5)
    bound, grad_bound = BOUNDS[dtype_name]
    assert o.dtype == dtype and torch_rel(o, ref[0]) <= bound
    assert (o[0, :, 3] == 0).all() and (q.grad[0, :, 3] == 0).all()
    for x, r in zip((q, k, v, bias), ref[1:]):
        assert x.grad.shape == x.shape and torch_rel(x.grad, r) <= grad_bound


def test_torch_ops_eager_autograd_and_opcheck():
    torch = pytest.importorskip("torch")
    from tessera.ops import attention_masked
    q, k, v, mask, bias = torch_case(torch, torch.float16, torch.Generator().manual_seed(4))
    frozen = bias.detach()  # no grad wanted: dbias is not computed
    o = attention_masked(q, k, v, mask=mask, bias=frozen)
    o.sum().backward()
    assert frozen.grad is None and q.grad is not None
    ref = torch_reference(q, k, v, mask, frozen, False, 32 ** -0.5)
    assert torch_rel(o, ref[0]) <= 5e-3 and torch_rel(k.grad, ref[2]) <= 1e-2
    args = (q.detach(), k.detach(), v.detach(), mask, bias.detach(), False, 0.2)
    torch.library.opcheck(torch.ops.tessera.attention_masked_forward.default, args)
    o, lse = torch.ops.tessera.attention_masked_forward(*args)
    torch.library.opcheck(torch.ops.tessera.attention_masked_backward.default,
                          (*args[:3], o, lse, torch.ones_like(o), mask, bias.detach(), False,
                           0.2, True))


def test_byte_and_flop_model(interpret):
    from tessera.ops.masked_attention.model import model
    B, H, S, D = 2, 4, 256, 64
    q = np.zeros((B, H, S, D), np.float16)
    mask = np.ones((1, 1, S, S), bool)
    mask[..., :128, 128:] = False  # one of the four 128-blocks dead
    table = block_table(mask, q.shape, S, False)
    moved, flops = model(q, q, table, mask=None)
    assert flops == 2 * 2 * B * H * (3 * 128 * 128) * D
    assert moved == (2 * B * H * S * D + 2 * B * H * S * D) * 2 + B * H * S * 4
    _, backward_flops = model(q, q, table, backward=True)
    assert backward_flops == 5 / 2 * flops
    with_bias, _ = model(q, q, table, mask=None, bias=np.zeros((1, H, 1, S), np.float32))
    assert with_bias == moved + H * S * 4


def test_dead_tiles_are_never_read(interpret):
    # Key blocks 1 and 3 are dead for every query, and query block 2 sees no key: their K, V,
    # bias (and Q, dO) hold NaN, which any read would carry into the outputs.
    rng = np.random.default_rng(12)
    Sq, Sk, D = 300, 450, 16
    mask = rng.random((1, 1, Sq, Sk)) < 0.7
    for kb in (1, 3):
        mask[..., :, kb * SUPER:(kb + 1) * SUPER] = False
    mask[..., 2 * SUPER:, :] = False
    q, do = (rng.standard_normal((1, 2, Sq, D)).astype(np.float32) for _ in range(2))
    k, v = (rng.standard_normal((1, 2, Sk, D)).astype(np.float32) for _ in range(2))
    bias = rng.standard_normal((1, 2, 1, Sk)).astype(np.float32)
    clean = [x.copy() for x in (q, k, v, do, bias)]
    for x in (k, v, bias):
        for kb in (1, 3):
            x[..., kb * SUPER:(kb + 1) * SUPER, :] = np.nan if x is not bias else 0
    bias[..., SUPER:2 * SUPER] = np.nan
    bias[..., 3 * SUPER:] = np.nan
    q[..., 2 * SUPER:, :] = np.nan
    do[..., 2 * SUPER:, :] = np.nan
    table = block_table(mask, q.shape, Sk, False)[0]
    assert (table > 0).sum() == 2 * 2 and (table[:, [1, 3]] == 0).all() and (table[2] == 0).all()
    o, lse = attention_masked_forward(q, k, v, mask, bias, False, 0.25)
    dq, dk, dv, dbias = attention_masked_backward(q, k, v, o, lse, do, mask, bias, False, 0.25,
                                                  bias_grad=True)
    ref = reference(*(x.astype(np.float64) for x in clean[:4]), mask, clean[4], False, 0.25)
    live_q = slice(0, 2 * SUPER)
    assert relative_error(o[..., live_q, :], ref[0][..., live_q, :]) < 5e-3
    assert (o[..., 2 * SUPER:, :] == 0).all() and (dq[..., 2 * SUPER:, :] == 0).all()
    for got, want in ((dk, ref[2]), (dv, ref[3])):
        assert np.isfinite(got).all() and relative_error(got, want) < 1e-2
    assert np.isfinite(dbias).all()
    assert relative_error(dbias, ref[4].sum(axis=2, keepdims=True)) < 1e-2


def test_live_tile_table_is_kept_per_mask_and_version(interpret):
    torch = pytest.importorskip("torch")
    from tessera.ops.masked_attention import blocks
    mask = torch.rand((1, 1, 200, 200), generator=torch.Generator().manual_seed(0)) < 0.5
    mask[..., :128, 128:] = False
    first = blocks.block_lists(mask, (1, 1, 200, 16), 200, False)
    both = blocks.block_lists(mask, (1, 1, 200, 16), 200, False, transposed=True)
    assert both[0] is first[0] and both[1] is first[1]  # the forward's lists, reused
    assert int(both[1][0, 0, 0]) + int(both[1][0, 0, 1]) == 1  # block (0, 1) is dead
    mask[..., :128, 128:] = True  # written: the table is made again
    again = blocks.block_lists(mask, (1, 1, 200, 16), 200, False)
    assert again[0] is not first[0]
    assert int(again[1][0, 0, 0]) + int(again[1][0, 0, 1]) == 2
    key = next(k for k in blocks._TABLES if k[0] == id(mask))
    del mask, first, both, again
    assert key not in blocks._TABLES  # dropped with its mask
