"""tessera.ops' masked attention on the GPU, fp16 and bf16 (and tf32 on one case), against
float64 autograd of the plain formula: random masks with all, ~50% and ~10% of the 128-blocks
live and random element-level masks, bias broadcast along each dim (dbias summed over them),
a key bias and a key-padding mask (Sq dim 1: read as one row per tile), grouped-query heads,
lengths that are multiples of no block, fully masked rows (0, no NaN); torch.compile
(fullgraph=True) and opcheck; dead tiles never read (NaN there changes nothing) and the
live-tile table counted; the table reused by the backward. No timing here: speed is
benchmarks/attention_masked.py's (all-live <= 1.25x dense, 10% live <= 0.2x of all-live).

Bounds as the dense attention's: O ≤ 5e-3 (fp16, tf32), 1e-2 (bf16); gradients twice that.
"""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

from tessera.ops import attention_masked  # noqa: E402
from tessera.ops.masked_attention import SUPER  # noqa: E402

BOUNDS = {"float16": (5e-3, 1e-2), "bfloat16": (1e-2, 2e-2), "float32": (5e-3, 1e-2)}


def reference(q, k, v, do, mask, bias, causal, scale):
    q, k, v = (x.detach().double().requires_grad_() for x in (q, k, v))
    b = None if bias is None else bias.detach().double().requires_grad_()
    G = q.shape[1] // k.shape[1]
    s = q @ k.repeat_interleave(G, 1).transpose(-1, -2) * scale
    if b is not None:
        s = s + b
    visible = torch.ones(s.shape[-2:], dtype=torch.bool, device=q.device)
    if causal:
        visible = visible.tril()
    if mask is not None:
        visible = visible & mask
    p = torch.softmax(s.masked_fill(~visible, float("-inf")), -1).nan_to_num(0.0)
    o = p @ v.repeat_interleave(G, 1)
    inputs = (q, k, v) + (() if b is None else (b,))
    return (o.detach(), *torch.autograd.grad(o, inputs, do.double()))


def block_mask(shape, live, element, gen):
    *lead, Sq, Sk = shape
    nq, nk = -(-Sq // SUPER), -(-Sk // SUPER)
    blocks = torch.rand((*lead, nq, nk), generator=gen, device="cuda") < live
    dense = blocks.repeat_interleave(SUPER, -2).repeat_interleave(SUPER, -1)[..., :Sq, :Sk]
    return dense & (torch.rand(shape, generator=gen, device="cuda") < element)


def check(B, Hq, Hkv, Sq, Sk, D, dtype_name, mask_shape, bias_shape, causal, live=1.0,
          element=0.6, seed=0, dead_rows=()):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    dtype = getattr(torch, dtype_name)
    rand = lambda *s: torch.randn(s, generator=gen, device="cuda").to(dtype)  # noqa: E731
    q, do = rand(B, Hq, Sq, D), rand(B, Hq, Sq, D)
    k, v = rand(B, Hkv, Sk, D), rand(B, Hkv, Sk, D)
    mask = None if mask_shape is None else block_mask(mask_shape, live, element, gen)
    for row in dead_rows:
        mask[..., row, :] = False
    bias = None if bias_shape is None else rand(*bias_shape)
    inputs = [x.requires_grad_() for x in (q, k, v) + (() if bias is None else (bias,))]
    scale = D ** -0.5 * 0.8
    o = attention_masked(q, k, v, mask=mask, bias=bias, causal=causal, scale=scale)
    grads = torch.autograd.grad(o, inputs, do)
    ref = reference(q, k, v, do, mask, bias, causal, scale)
    bound, grad_bound = BOUNDS[dtype_name]
    assert torch.isfinite(o).all() and all(torch.isfinite(g).all() for g in grads)
    rel = lambda x, r: ((x.double() - r).norm() / r.norm().clamp_min(1e-30)).item()  # noqa
    assert rel(o, ref[0]) <= bound
    for name, got, want in zip(("dq", "dk", "dv", "dbias"), grads, ref[1:]):
        assert got.shape == want.shape and rel(got, want) <= grad_bound, name
    return o, grads


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
@pytest.mark.parametrize("live", [1.0, 0.5, 0.1])
@pytest.mark.parametrize("D", [64, 128])
def test_block_sparse_masks(D, live, dtype_name):
    check(2, 4, 4, 1000, 1100, D, dtype_name, (2, 4, 1000, 1100), None, False, live=live,
          element=0.9, seed=int(live * 10) + D)


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16", "float32"])
def test_element_masks_causal_gqa_and_bias(dtype_name):
    check(2, 8, 2, 777, 777, 64, dtype_name, (1, 8, 777, 777), (2, 8, 777, 777), True,
          element=0.5, seed=5)


@pytest.mark.parametrize("bias_shape", [(1, 4, 513, 600), (2, 1, 513, 600), (2, 4, 1, 600),
                                        (1, 1, 1, 600)], ids=["batch", "heads", "rows", "all"])
@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
def test_bias_broadcasts(bias_shape, dtype_name):
    check(2, 4, 2, 513, 600, 128, dtype_name, (2, 1, 1, 600), bias_shape, False, seed=7)


@pytest.mark.parametrize("causal", [False, True])
def test_bias_without_a_mask(causal):
    # No mask: the live-block table (causal and bounds only) is built on the query's GPU.
    check(2, 4, 2, 700, 650, 64, "float16", None, (2, 4, 700, 650), causal, seed=11)


def test_fully_masked_rows():
    dead = (0, 300, 511)
    o, grads = check(1, 2, 2, 512, 512, 64, "float16", (1, 2, 512, 512), (1, 2, 512, 512),
                     False, seed=9, dead_rows=dead)
    assert (o[:, :, list(dead)] == 0).all() and (grads[0][:, :, list(dead)] == 0).all()


def test_torch_compile_fullgraph():
    gen = torch.Generator(device="cuda").manual_seed(2)
    q, k, v = (torch.randn((2, 4, 1024, 64), generator=gen, device="cuda",
                           dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    i = torch.arange(1024, device="cuda")
    window = ((i[:, None] - i[None, :]).abs() < 200)[None, None]
    bias = (-(i[:, None] - i[None, :]).abs().float() / 64)[None, None].to(torch.bfloat16)
    bias.requires_grad_()
    o = torch.compile(attention_masked, fullgraph=True)(q, k, v, mask=window, bias=bias,
                                                         causal=True)
    o.sum().backward()
    ref = reference(q, k, v, torch.ones_like(o), window, bias, True, 64 ** -0.5)
    assert ((o.double() - ref[0]).norm() / ref[0].norm()).item() <= 1e-2
    assert ((bias.grad.double() - ref[4]).norm() / ref[4].norm()).item() <= 2e-2
    args = (q.detach(), k.detach(), v.detach(), window, bias.detach(), True, 0.125)
    torch.library.opcheck(torch.ops.tessera.attention_masked_forward.default, args)


@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_key_bias_and_padding_mask(D, causal):
    # Sq dim 1: the bias and mask rows are read once per key tile (HAS_BIAS = KEYS); the
    # all-true blocks (full tiles, no mask read) and the padded ends (partial) both occur.
    check(2, 8, 2, 1000, 1000, D, "bfloat16", (2, 1, 1, 1000), (1, 8, 1, 1000), causal,
          element=0.9, seed=D + causal)


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
def test_all_true_mask_with_bias_is_the_dense_path(dtype_name):
    # Every tile full: no mask tile is read; the 128-register default at D = 64 on Hopper.
    check(2, 16, 16, 1024, 1024, 64, dtype_name, (1, 1, 1024, 1024), (1, 16, 1, 1024), False,
          element=1.0, seed=21)


@pytest.mark.parametrize("bias_rows", [1, 700], ids=["key_bias", "full_bias"])
def test_dead_tiles_are_never_read(bias_rows):
    # Key blocks 1 and 3 are dead for every query and query block 2 sees no key: NaN in their
    # K, V, bias, Q and dO would reach the outputs if any were read.
    gen = torch.Generator(device="cuda").manual_seed(bias_rows)
    Sq, Sk, D, H = 700, 600, 64, 4
    rand = lambda *s: torch.randn(s, generator=gen, device="cuda").half()  # noqa: E731
    q, do, k, v = rand(1, H, Sq, D), rand(1, H, Sq, D), rand(1, H, Sk, D), rand(1, H, Sk, D)
    bias = rand(1, H, bias_rows, Sk)
    mask = torch.rand((1, 1, Sq, Sk), generator=gen, device="cuda") < 0.7
    dead_keys = torch.zeros(Sk, dtype=torch.bool, device="cuda")
    for kb in (1, 3):
        dead_keys[kb * SUPER:(kb + 1) * SUPER] = True
    mask[..., dead_keys] = False
    mask[..., 2 * SUPER:3 * SUPER, :] = False
    ref = reference(q, k, v, do, mask, bias, False, 0.125)
    for x in (k, v):
        x[..., dead_keys, :] = float("nan")
    bias[..., dead_keys] = float("nan")
    q[..., 2 * SUPER:3 * SUPER, :] = float("nan")
    do[..., 2 * SUPER:3 * SUPER, :] = float("nan")
    inputs = [x.requires_grad_() for x in (q, k, v, bias)]
    o = attention_masked(q, k, v, mask=mask, bias=bias, scale=0.125)
    dq, dk, dv, dbias = torch.autograd.grad(o, inputs, do)
    live = torch.ones(Sq, dtype=torch.bool, device="cuda")
    live[2 * SUPER:3 * SUPER] = False
    rel = lambda x, r: ((x.double() - r).norm() / r.norm()).item()  # noqa: E731
    assert (o[..., ~live, :] == 0).all() and (dq[..., ~live, :] == 0).all()
    assert rel(o[..., live, :], ref[0][..., live, :]) <= 5e-3
    for got, want in ((dk, ref[2]), (dv, ref[3]), (dbias, ref[4])):
        assert torch.isfinite(got).all() and rel(got, want) <= 1e-2
    from tessera.ops.masked_attention import block_table
    table = block_table(mask, tuple(q.shape), Sk, False)[0]
    # 6 query blocks (block 2 dead) x 5 key blocks (1 and 3 dead): 5 x 3 live tiles.
    assert int((table > 0).sum()) == 5 * 3 and int((table[:, [1, 3]] > 0).sum()) == 0
    assert int((table[2] > 0).sum()) == 0


def test_backward_reuses_the_forward_table():
    from tessera.ops.masked_attention import blocks
    gen = torch.Generator(device="cuda").manual_seed(3)
    q, k, v = (torch.randn((1, 2, 512, 64), generator=gen, device="cuda",
                           dtype=torch.float16, requires_grad=True) for _ in range(3))
    mask = torch.rand((1, 1, 512, 512), generator=gen, device="cuda") < 0.5
    o = attention_masked(q, k, v, mask=mask)
    entry = next(e for key, (_, _, e) in blocks._TABLES.items() if key[0] == id(mask))
    table = entry["table"]
    o.sum().backward()
    assert entry["table"] is table and "cols" in entry  # the backward's lists, same table
