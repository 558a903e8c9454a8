"""Triton 3.6 names on the GPU against NumPy: tuple kernel arguments (nested, None and
tl.constexpr elements, namedtuples; the Python launch path), tuples carried through loops,
tl.slice / tl.pi32_t / tl.const, tl.condition(disable_licm=True), tl.target_info."""
from collections import namedtuple

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import tessera  # noqa: E402
import tessera.language as tl  # noqa: E402

BLOCK = 128
Pair = namedtuple("Pair", ["x", "y"])


@tessera.jit
def tuple_kernel(args, out, n, steps, BLOCK: tl.constexpr):
    first, second, pair = args
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(first[0] + offs, mask=mask) * first[1]
    if second[0] is None:
        x = x + second[1]
    state = (x, tl.load(pair.x + offs, mask=mask) + pair.y)
    for _ in range(steps):
        state = (state[0] * 0.5, state[1] + state[0])
    tl.store(out[0] + offs, state[0], mask=mask)
    tl.store(out[1] + offs, state[1], mask=mask)


@pytest.mark.parametrize("n", [1, 300, 1000])
def test_tuple_arguments(n):
    rng = np.random.default_rng()
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    scale, shift, steps = float(rng.standard_normal()), float(rng.standard_normal()), 3
    dx, dy = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
    o0, o1 = torch.zeros(n, device="cuda"), torch.zeros(n, device="cuda")
    for _ in range(2):  # the second launch too (tuples stay on the Python path)
        tuple_kernel[(tessera.cdiv(n, BLOCK),)](((dx, scale), (None, tl.constexpr(3)),
                                                 Pair(x=dy, y=shift)), (o0, o1), n, steps,
                                                BLOCK=BLOCK)
    a = x.astype(np.float64) * np.float32(scale) + 3
    b = y.astype(np.float64) + np.float32(shift)
    for _ in range(steps):
        a, b = a * 0.5, b + a
    np.testing.assert_allclose(o0.cpu().numpy(), a, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(o1.cpu().numpy(), b, rtol=1e-5, atol=1e-5)


@tessera.jit
def small_names(x: tl.const, bits_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    s = tl.tuple([1, 2, 3, 4])[tl.slice(1, None, 2)]
    tl.store(bits_ptr + offs, tl.load(x.to(tl.pi32_t) + offs, mask=mask), mask=mask)
    i = 0
    acc = tl.zeros((BLOCK,), tl.float32)
    while tl.condition(i < 3, disable_licm=True):
        acc += tl.load(x + offs, mask=mask) * (s[0] + s[1])
        i += 1
    if tl.target_info.cuda_capability_geq(8, 0):
        tl.store(out_ptr + offs, acc, mask=mask)


@pytest.mark.parametrize("n", [1, 300])
def test_small_names(n):
    rng = np.random.default_rng()
    x = rng.standard_normal(n).astype(np.float32)
    bits = torch.zeros(n, dtype=torch.int32, device="cuda")
    out = torch.zeros(n, device="cuda")
    small_names[(tessera.cdiv(n, BLOCK),)](torch.from_numpy(x).cuda(), bits, out, n,
                                           BLOCK=BLOCK)
    np.testing.assert_array_equal(bits.cpu().numpy(), x.view(np.int32))
    np.testing.assert_allclose(out.cpu().numpy(), x.astype(np.float64) * 18, rtol=1e-6)


@tessera.jit
def _selu_scalar(x, alpha):
    if x > 0:
        return x
    else:
        return alpha * (tl.exp(x) - 1)


@tessera.jit
def _lookup(i, table_ptr, n):
    if i < n:
        v = tl.load(table_ptr + i)
    else:
        v = -1.0
    return v, i * 2


@tessera.jit
def map_kernel(x_ptr, idx_ptr, table_ptr, out_ptr, twice_ptr, n, table_n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    i = tl.load(idx_ptr + offs, mask=mask, other=0)
    v, twice = tl.map_elementwise(_lookup, i, table_ptr, table_n)
    tl.store(out_ptr + offs, tl.map_elementwise(_selu_scalar, x, 1.67) + v, mask=mask)
    tl.store(twice_ptr + offs, twice, mask=mask)


@pytest.mark.parametrize("n", [1, 300, 1000])
def test_map_elementwise(n):
    rng = np.random.default_rng()
    x = (rng.standard_normal(n) * 2).astype(np.float32)
    table = rng.standard_normal(37).astype(np.float32)
    idx = rng.integers(0, 74, n).astype(np.int32)
    out = torch.zeros(n, device="cuda")
    twice = torch.zeros(n, dtype=torch.int32, device="cuda")
    map_kernel[(tessera.cdiv(n, BLOCK),)](torch.from_numpy(x).cuda(), torch.from_numpy(idx).cuda(),
                                          torch.from_numpy(table).cuda(), out, twice, n, 37,
                                          BLOCK=BLOCK)
    x64 = x.astype(np.float64)
    valid = idx < 37
    expected = np.where(x64 > 0, x64, np.float32(1.67) * (np.exp(x64) - 1)) + \
        np.where(valid, table[np.where(valid, idx, 0)], -1.0)
    np.testing.assert_allclose(out.cpu().numpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(twice.cpu().numpy(), idx * 2)


E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


@tessera.jit
def scaled_dot_kernel(a_ptr, sa_ptr, b_ptr, sb_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr,
                      K: tl.constexpr):
    a = tl.load(a_ptr + tl.arange(0, M)[:, None] * (K // 2) + tl.arange(0, K // 2)[None, :])
    b = tl.load(b_ptr + tl.arange(0, K)[:, None] * N + tl.arange(0, N)[None, :])
    sa = tl.load(sa_ptr + tl.arange(0, M)[:, None] * (K // 32) + tl.arange(0, K // 32)[None, :])
    sb = tl.load(sb_ptr + tl.arange(0, N)[:, None] * (K // 32) + tl.arange(0, K // 32)[None, :])
    c = tl.dot_scaled(a, sa, "e2m1", b, sb, "e4m3")
    tl.store(c_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :], c)


def test_dot_scaled():
    import ml_dtypes
    rng = np.random.default_rng()
    M, N, K = 64, 32, 128
    a = rng.integers(0, 256, (M, K // 2)).astype(np.uint8)
    b = rng.standard_normal((K, N)).astype(ml_dtypes.float8_e4m3fn)
    sa = rng.integers(117, 137, (M, K // 32)).astype(np.uint8)
    sb = rng.integers(117, 137, (N, K // 32)).astype(np.uint8)
    c = torch.zeros((M, N), device="cuda")
    cuda = [torch.from_numpy(x).cuda() for x in (a, sa, b.view(np.uint8), sb)]
    scaled_dot_kernel[(1,)](cuda[0], cuda[1], cuda[2], cuda[3], c, M=M, N=N, K=K)
    av = np.stack([E2M1[a & 15], E2M1[a >> 4]], -1).reshape(M, K)
    av *= np.repeat(2.0 ** (sa - 127.0), 32, axis=1)
    bv = b.astype(np.float64) * np.repeat(2.0 ** (sb - 127.0), 32, axis=1).T
    bound = np.abs(av) @ np.abs(bv) * K * 2.0 ** -23
    assert np.all(np.abs(c.cpu().numpy() - av @ bv) <= bound + 1e-30)
