"""tl.philox / randint / randint4x / rand / rand4x / randn / randn4x / uint_to_uniform_float /
pair_uniform_to_normal in the interpreter, bit for bit against an independent NumPy Philox
(philox_reference.py), itself checked against the Random123 known-answer vectors."""
import inspect

import numpy as np
import pytest

import tessera
import tessera.language as tl
import philox_reference as ref

# Random123's known answers for philox4x32-10 (counter, key) -> output.
KAT_4X32 = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("counter, key, expected", KAT_4X32)
def test_reference_matches_random123(counter, key, expected):
    got = ref.philox([np.array([c]) for c in counter], key)
    assert [int(g[0]) for g in got] == list(expected)


@tessera.jit(interpret=True)
def randint4x_kernel(out_ptr, seed, base, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    r0, r1, r2, r3 = tl.randint4x(seed, base + offs)
    mask = offs < n
    tl.store(out_ptr + offs, r0, mask=mask)
    tl.store(out_ptr + n + offs, r1, mask=mask)
    tl.store(out_ptr + 2 * n + offs, r2, mask=mask)
    tl.store(out_ptr + 3 * n + offs, r3, mask=mask)


@pytest.mark.parametrize("seed", [0, 12345, -7, 2**31 - 1, 0xFFFFFFFF, 2**40 + 3, -(2**50),
                                  2**64 - 5])
@pytest.mark.parametrize("base", [0, 1000, 2**33 + 5])
def test_randint4x_bits(rng, seed, base):
    """Seeds as int32 and int64 values (negative ones sign-extended into the key's high
    word), 32- and 64-bit offsets (the high word is the second counter), ragged n."""
    n = int(rng.integers(1, 300))
    out = np.zeros(4 * n, np.uint32)
    randint4x_kernel[(tessera.cdiv(n, 64),)](out, seed, base, n, BLOCK=64)
    offsets = np.arange(n) + base
    offsets = offsets.astype(np.int64 if base >= 2**31 else np.int32)
    expected = ref.randint4x(seed, offsets)
    for word in range(4):
        np.testing.assert_array_equal(out[word * n:(word + 1) * n], expected[word])


@tessera.jit(interpret=True)
def scalar_kernel(out_ptr, seed, offs_ptr, n, KIND: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    counters = tl.load(offs_ptr + offs, mask=mask, other=0)
    if KIND == "randint":
        value = tl.randint(seed, counters)
    elif KIND == "rand":
        value = tl.rand(seed, counters)
    else:
        value = tl.randn(seed, counters)
    tl.store(out_ptr + offs, value, mask=mask)


@pytest.mark.parametrize("offset_dtype", [np.int32, np.int64])
def test_randint_rand_randn(rng, offset_dtype):
    """Ragged, unordered offsets loaded from memory; randint and rand exact, randn within
    float32 rounding of float64 Box-Muller on the same uniforms."""
    n = int(rng.integers(1, 500))
    high = 2**31 - 1 if offset_dtype == np.int32 else 2**62
    offsets = rng.integers(-high, high, n).astype(offset_dtype)
    seed = int(rng.integers(-2**63, 2**63))
    bits = ref.randint4x(seed, offsets)
    for kind, dtype in (("randint", np.uint32), ("rand", np.float32), ("randn", np.float32)):
        out = np.zeros(n, dtype)
        scalar_kernel[(tessera.cdiv(n, 128),)](out, seed, offsets, n, KIND=kind, BLOCK=128)
        if kind == "randint":
            np.testing.assert_array_equal(out, bits[0])
        elif kind == "rand":
            np.testing.assert_array_equal(out, ref.uniform(bits[0]))
            assert out.min() >= 0.0 and out.max() < 1.0
        else:
            normal, _ = ref.box_muller(ref.uniform(bits[0]), ref.uniform(bits[1]))
            np.testing.assert_allclose(out, normal, rtol=1e-5, atol=1e-5)


@tessera.jit(interpret=True)
def four_kernel(out_ptr, seed, n, NORMAL: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if NORMAL:
        a, b, c, d = tl.randn4x(seed, offs)
    else:
        a, b, c, d = tl.rand4x(seed, offs)
    values = (a, b, c, d)
    for i in tl.static_range(4):
        tl.store(out_ptr + i * n + offs, values[i], mask=mask)


def test_rand4x_randn4x(rng):
    n, seed = int(rng.integers(1, 400)), int(rng.integers(0, 2**31))
    bits = ref.randint4x(seed, np.arange(n, dtype=np.int32))
    uniforms = [ref.uniform(b) for b in bits]
    out = np.zeros(4 * n, np.float32)
    four_kernel[(tessera.cdiv(n, 64),)](out, seed, n, NORMAL=False, BLOCK=64)
    np.testing.assert_array_equal(out, np.concatenate(uniforms))
    four_kernel[(tessera.cdiv(n, 64),)](out, seed, n, NORMAL=True, BLOCK=64)
    normals = [*ref.box_muller(uniforms[0], uniforms[1]), *ref.box_muller(uniforms[2], uniforms[3])]
    np.testing.assert_allclose(out, np.concatenate(normals), rtol=1e-5, atol=1e-5)
    # Box-Muller's normals: a sample of 4n values has mean ~0, variance ~1
    assert abs(out.mean()) < 5 / np.sqrt(4 * n) + 0.05


@tessera.jit(interpret=True)
def philox64_kernel(out_ptr, uniform_ptr, seed, c_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    c0 = tl.load(c_ptr + offs, mask=mask, other=0)
    c1 = tl.load(c_ptr + n + offs, mask=mask, other=0)
    r0, r1, r2, r3 = tl.philox(seed, c0, c1, c0 ^ c1, c1 * 0 + 7, n_rounds=7)
    values = (r0, r1, r2, r3)
    for i in tl.static_range(4):
        tl.store(out_ptr + i * n + offs, values[i], mask=mask)
    tl.store(uniform_ptr + offs, tl.uint_to_uniform_float(r0), mask=mask)


def test_philox_64bit_counters(rng):
    """64-bit counters run Philox-4x64 keyed by (seed, 0); fewer rounds through n_rounds."""
    n = int(rng.integers(1, 32))
    counters = rng.integers(-2**63, 2**63, 2 * n, dtype=np.int64)
    seed = int(rng.integers(-2**31, 2**31))
    out, uniform = np.zeros(4 * n, np.uint64), np.zeros(n, np.float32)
    philox64_kernel[(1,)](out, uniform, seed, counters, n, BLOCK=32)
    c0, c1 = counters[:n], counters[n:]
    expected = ref.philox([c0.view(np.uint64), c1.view(np.uint64), (c0 ^ c1).view(np.uint64),
                           np.full(n, 7, np.uint64)], [seed % 2**64, 0], width=64, rounds=7)
    for word in range(4):
        np.testing.assert_array_equal(out[word * n:(word + 1) * n], expected[word])
    np.testing.assert_array_equal(uniform, ref.uniform64(expected[0]))


@tessera.jit(interpret=True)
def seed_kinds_kernel(out_ptr, seed, SEED: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    if SEED is None:
        tl.store(out_ptr + offs, tl.randint(seed, offs))
    else:  # a compile-time seed: a Python int
        tl.store(out_ptr + offs, tl.randint(SEED, offs))


def test_constexpr_seed_and_float_seed_error(rng):
    seed = int(rng.integers(0, 2**31))
    runtime, constant = np.zeros(32, np.uint32), np.zeros(32, np.uint32)
    seed_kinds_kernel[(1,)](runtime, seed, SEED=None, BLOCK=32)
    seed_kinds_kernel[(1,)](constant, 0, SEED=seed, BLOCK=32)
    np.testing.assert_array_equal(runtime, ref.randint4x(seed, np.arange(32, dtype=np.int32))[0])
    np.testing.assert_array_equal(constant, runtime)
    with pytest.raises(tessera.CompilationError) as info:
        seed_kinds_kernel[(1,)](runtime, 1.5, SEED=None, BLOCK=32)
    message = str(info.value)
    assert "philox's seed must be an integer" in message
    lines, start = inspect.getsourcelines(seed_kinds_kernel.fn)
    line = start + next(i for i, text in enumerate(lines) if "tl.randint(seed, offs)" in text)
    assert f"in randint(), inlined at {__file__}:{line}:" in message
