"""Counter-based random numbers: Philox-4x32-10 (and its 64-bit variant), as triton.language.

Every function here is a @jit helper written in the language itself (``core.helper``),
inlined into the kernel that calls it, so the interpreter and the GPU run the same integer
arithmetic and give the same bits. The stream is a pure function of ``(seed, offset)``: the
same seed and offsets give the same numbers in any kernel, any block size and any program
order, which is what lets a dropout kernel regenerate its mask in the backward pass instead
of storing it::

    @tessera.jit
    def dropout(x_ptr, out_ptr, n, p, seed, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        keep = tl.rand(seed, offs) > p
        x = tl.load(x_ptr + offs, mask=offs < n)
        tl.store(out_ptr + offs, tl.where(keep, x / (1 - p), 0.0), mask=offs < n)

Counters are the offsets (low word, high word for 64-bit offsets, then two zeros); the key is
the seed (low word, high word). Results are bit-identical to Triton 3.6 for the same seed and
offsets: the round constants, the key schedule, the order of the four output words and the
integer -> float conversion follow Triton's definitions.
"""
from __future__ import annotations

from typing import Any

from . import core as tl
from . import math
from .core import builtin, helper

# Philox with 10 rounds is the variant whose statistical quality Random123 establishes.
N_ROUNDS_DEFAULT = tl.constexpr(10)


@builtin
def _to_tensor(x: Any, _semantic=None) -> tl.tensor:
    """A Python number becomes a runtime scalar of its natural dtype; a tensor stays itself."""
    return _semantic.to_tensor(tl._unwrap(x))


@helper
def philox_impl(c0, c1, c2, c3, k0, k1, n_rounds: tl.constexpr = N_ROUNDS_DEFAULT):
    """Runs ``n_rounds`` Philox rounds on the counter ``(c0, c1, c2, c3)`` with the key
    ``(k0, k1)``; all six are uint32 (Philox-4x32) or all uint64 (Philox-4x64). Returns the
    four scrambled words. Example: ``a, b, c, d = tl.philox_impl(c0, c1, c2, c3, k0, k1)``."""
    if c0.dtype == tl.uint32:
        KEY_A: tl.constexpr = 0x9E3779B9  # the golden ratio and sqrt(3) - 1, in 32 bits
        KEY_B: tl.constexpr = 0xBB67AE85
        ROUND_A: tl.constexpr = 0xD2511F53
        ROUND_B: tl.constexpr = 0xCD9E8D57
    else:
        tl.static_assert(c0.dtype == tl.uint64, "philox_impl needs uint32 or uint64 counters")
        KEY_A: tl.constexpr = 0x9E3779B97F4A7C15
        KEY_B: tl.constexpr = 0xBB67AE8584CAA73B
        ROUND_A: tl.constexpr = 0xD2E7470EE14C6C93
        ROUND_B: tl.constexpr = 0xCA5A826395121157
    for _ in tl.static_range(n_rounds):
        old_c0, old_c2 = c0, c2
        c0 = math.umulhi(ROUND_B, old_c2) ^ c1 ^ k0
        c2 = math.umulhi(ROUND_A, old_c0) ^ c3 ^ k1
        c1 = ROUND_B * old_c2  # unsigned: wraps modulo 2**32 (2**64)
        c3 = ROUND_A * old_c0
        k0 = k0 + KEY_A  # the Weyl sequence of the key schedule
        k1 = k1 + KEY_B
    return c0, c1, c2, c3


@helper
def philox(seed, c0, c1, c2, c3, n_rounds: tl.constexpr = N_ROUNDS_DEFAULT):
    """Philox on the counter ``(c0, c1, c2, c3)`` (32-bit or 64-bit integers, reinterpreted as
    unsigned) keyed by the integer ``seed``: for 32-bit counters the key is the seed's low and
    high words; for 64-bit counters the seed itself and 0. Returns four unsigned words.
    Example: ``r0, r1, r2, r3 = tl.philox(seed, offs, 0, 0, 0)``."""
    seed = _to_tensor(seed)
    tl.static_assert(seed.dtype.is_int(), "philox's seed must be an integer")
    seed = seed.to(tl.uint64)
    c0 = _to_tensor(c0)
    c1 = _to_tensor(c1)
    c2 = _to_tensor(c2)
    c3 = _to_tensor(c3)
    if tl.constexpr(c0.dtype.primitive_bitwidth) == 32:
        int_dtype: tl.constexpr = tl.uint32
        seed_hi = ((seed >> 32) & 0xFFFFFFFF).to(tl.uint32)
        seed_lo = (seed & 0xFFFFFFFF).to(tl.uint32)
    else:
        tl.static_assert(tl.constexpr(c0.dtype.primitive_bitwidth) == 64,
                         "philox needs 32-bit or 64-bit counters")
        int_dtype: tl.constexpr = tl.uint64
        seed_hi = tl.full((1,), 0, dtype=int_dtype)
        seed_lo = seed
    c0 = c0.to(int_dtype, bitcast=True)
    c1 = c1.to(int_dtype, bitcast=True)
    c2 = c2.to(int_dtype, bitcast=True)
    c3 = c3.to(int_dtype, bitcast=True)
    return philox_impl(c0, c1, c2, c3, seed_lo, seed_hi, n_rounds)


@helper
def randint4x(seed, offset, n_rounds: tl.constexpr = N_ROUNDS_DEFAULT):
    """Four blocks of random uint32 for the integer ``seed`` and the integer block ``offset``
    (the counter is the offset's low word, its high word for 64-bit offsets, 0, 0): the
    cheapest way to get several streams. Example:
    ``r0, r1, r2, r3 = tl.randint4x(seed, tl.arange(0, BLOCK))``."""
    offset_lo = offset.to(tl.uint32)
    zero = offset_lo * 0
    if tl.constexpr(offset.dtype.primitive_bitwidth) > 32:
        offset_hi = (offset >> 32).to(tl.uint32)
    else:
        offset_hi = zero
    return philox(seed, offset_lo, offset_hi, zero, zero, n_rounds)


@helper
def randint(seed, offset, n_rounds: tl.constexpr = N_ROUNDS_DEFAULT):
    """A block of random uint32 (the first word of ``randint4x``) for ``seed`` and the block
    ``offset``. Example: ``bits = tl.randint(seed, offs)``."""
    ret, _, _, _ = randint4x(seed, offset, n_rounds)
    return ret


@helper
def uint_to_uniform_float(x):
    """Maps random 32-bit (64-bit) integers to float32 uniform in [0, 1): the bits read as a
    signed integer, negatives folded onto ``-x - 1``, times the largest scale that keeps the
    maximum below 1.0 after float rounding. Example: ``u = tl.uint_to_uniform_float(bits)``."""
    if tl.constexpr(x.dtype == tl.uint32) or tl.constexpr(x.dtype == tl.int32):
        x = x.to(tl.int32, bitcast=True)
        scale = 4.6566127342e-10  # a runtime fp32 scalar, as any assigned number
    else:
        tl.static_assert(tl.constexpr(x.dtype == tl.uint64) or tl.constexpr(x.dtype == tl.int64),
                         "uint_to_uniform_float needs 32-bit or 64-bit integers")
        x = x.to(tl.int64, bitcast=True)
        scale = 1.0842020432385337e-19
    x = tl.where(x < 0, -x - 1, x)
    return x * scale


@helper
def rand(seed, offset, n_rounds: tl.constexpr = N_ROUNDS_DEFAULT):
    """A block of random float32 uniform in [0, 1) for ``seed`` and the block ``offset``.
    Example: ``keep = tl.rand(seed, offs) > p``."""
    source = randint(seed, offset, n_rounds)
    return uint_to_uniform_float(source)


@helper
def rand4x(seed, offsets, n_rounds: tl.constexpr = N_ROUNDS_DEFAULT):
    """Four blocks of random float32 uniform in [0, 1) (the four words of ``randint4x``).
    Example: ``u0, u1, u2, u3 = tl.rand4x(seed, offs)``."""
    i1, i2, i3, i4 = randint4x(seed, offsets, n_rounds)
    u1 = uint_to_uniform_float(i1)
    u2 = uint_to_uniform_float(i2)
    u3 = uint_to_uniform_float(i3)
    u4 = uint_to_uniform_float(i4)
    return u1, u2, u3, u4


@helper
def pair_uniform_to_normal(u1, u2):
    """The Box-Muller transform: two independent uniform blocks -> two independent standard
    normal blocks (``u1`` clamped to 1e-7 so the logarithm stays finite).
    Example: ``n1, n2 = tl.pair_uniform_to_normal(u1, u2)``."""
    u1 = tl.maximum(1.0e-7, u1)
    th = 6.283185307179586 * u2
    r = math.sqrt(-2.0 * math.log(u1))
    return r * math.cos(th), r * math.sin(th)


@helper
def randn(seed, offset, n_rounds: tl.constexpr = N_ROUNDS_DEFAULT):
    """A block of random float32 from the standard normal distribution N(0, 1) for ``seed``
    and the block ``offset``. Example: ``noise = tl.randn(seed, offs)``."""
    i1, i2, _, _ = randint4x(seed, offset, n_rounds)
    u1 = uint_to_uniform_float(i1)
    u2 = uint_to_uniform_float(i2)
    n1, _ = pair_uniform_to_normal(u1, u2)
    return n1


@helper
def randn4x(seed, offset, n_rounds: tl.constexpr = N_ROUNDS_DEFAULT):
    """Four blocks of random float32 from N(0, 1) (Box-Muller on the pairs of ``rand4x``).
    Example: ``n0, n1, n2, n3 = tl.randn4x(seed, offs)``."""
    u1, u2, u3, u4 = rand4x(seed, offset, n_rounds)
    n1, n2 = pair_uniform_to_normal(u1, u2)
    n3, n4 = pair_uniform_to_normal(u3, u4)
    return n1, n2, n3, n4
