"""An independent NumPy model of Philox (Salmon et al., "Parallel random numbers: as easy as
1, 2, 3", SC'11) and of Triton's integer -> float conversions, written from the algorithm
(not from any kernel code), for the tests of tl.philox / tl.randint / tl.rand / tl.randn.

Philox-4xW (W = 32 or 64 bits), one round on the counter (c0, c1, c2, c3) with key (k0, k1):
    hi_a, lo_a = M0 * c0 (the 2W-bit product's halves)
    hi_b, lo_b = M1 * c2
    (c0, c1, c2, c3) = (hi_b ^ c1 ^ k0, lo_b, hi_a ^ c3 ^ k1, lo_a)
then the key takes one step of its Weyl sequence, (k0, k1) += (W0, W1) modulo 2**W.
"""
import numpy as np

CONSTANTS = {  # width -> (M0, M1, W0, W1), the paper's multipliers and Weyl increments
    32: (0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85),
    64: (0xD2E7470EE14C6C93, 0xCA5A826395121157, 0x9E3779B97F4A7C15, 0xBB67AE8584CAA73B),
}


def philox(counter, key, width=32, rounds=10):
    """counter: 4 arrays of unsigned words; key: 2 words (arrays or ints). Returns 4 arrays
    (np.uint32 for width 32; np.uint64 for width 64, computed with Python integers)."""
    m0, m1, w0, w1 = CONSTANTS[width]
    mask = (1 << width) - 1
    if width == 32:
        c = [np.asarray(x, np.uint64) & np.uint64(mask) for x in counter]
        k = [np.asarray(x, np.uint64) & np.uint64(mask) for x in key]
        for _ in range(rounds):
            a, b = np.uint64(m0) * c[0], np.uint64(m1) * c[2]  # exact: < 2**64
            c = [(b >> np.uint64(32)) ^ c[1] ^ k[0], b & np.uint64(mask),
                 (a >> np.uint64(32)) ^ c[3] ^ k[1], a & np.uint64(mask)]
            k = [(k[0] + np.uint64(w0)) & np.uint64(mask), (k[1] + np.uint64(w1)) & np.uint64(mask)]
        return [x.astype(np.uint32) for x in c]
    shape = np.broadcast(*[np.asarray(x) for x in counter]).shape
    c = [[int(v) & mask for v in np.broadcast_to(np.asarray(x), shape).ravel()] for x in counter]
    out = []
    for i in range(len(c[0])):
        x0, x1, x2, x3 = (c[j][i] for j in range(4))
        k0, k1 = (int(np.asarray(k).ravel()[0]) & mask for k in key)
        for _ in range(rounds):
            a, b = m0 * x0, m1 * x2
            x0, x1, x2, x3 = (b >> width) ^ x1 ^ k0, b & mask, (a >> width) ^ x3 ^ k1, a & mask
            k0, k1 = (k0 + w0) & mask, (k1 + w1) & mask
        out.append((x0, x1, x2, x3))
    return [np.array([o[j] for o in out], np.uint64).reshape(shape) for j in range(4)]


def randint4x(seed, offsets):
    """Triton's stream: counter (offset low word, offset high word, 0, 0), key = the seed's
    two's-complement 64 bits (low word, high word)."""
    wide = np.asarray(offsets).dtype.itemsize == 8  # 32-bit offsets have a zero high word
    offsets = np.asarray(offsets).astype(np.int64)
    seed64 = int(seed) % 2**64
    lo = offsets & 0xFFFFFFFF
    hi = (offsets >> 32) & 0xFFFFFFFF if wide else 0 * offsets
    zero = np.zeros_like(lo)
    return philox([lo, hi, zero, zero], [seed64 & 0xFFFFFFFF, seed64 >> 32])


def uniform(bits):
    """uint32 bits -> float32 in [0, 1): read as int32, negatives folded to -x - 1, times the
    fp32 scale 4.6566127342e-10, in float32 arithmetic."""
    x = np.asarray(bits, np.uint32).view(np.int32).astype(np.int64)
    x = np.where(x < 0, -x - 1, x)
    return x.astype(np.float32) * np.float32(4.6566127342e-10)


def uniform64(bits):
    """uint64 bits -> float32: as uniform() with int64 and the scale 1.0842020432385337e-19."""
    x = np.asarray(bits, np.uint64).view(np.int64)
    x = np.where(x < 0, -(x + 1), x)
    return x.astype(np.float32) * np.float32(1.0842020432385337e-19)


def box_muller(u1, u2):
    """The two normals of uniforms u1, u2 in float64 (u1 clamped to 1e-7)."""
    u1 = np.maximum(np.float32(1e-7), u1).astype(np.float64)
    th = (np.float32(6.283185307179586) * u2).astype(np.float64)
    r = np.sqrt(-2.0 * np.log(u1))
    return r * np.cos(th), r * np.sin(th)
