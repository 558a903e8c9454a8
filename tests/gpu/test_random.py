"""tl.randint4x / randint / rand / randn / rand4x / randn4x on the GPU: bit for bit against
an independent NumPy Philox (tests/python/philox_reference.py, checked there against
Random123's known answers), and, where Triton is installed, against Triton running the very
same kernel text (only the imports differ): randint and rand must give identical bits, randn
identical up to the last bits of the math library's log/sin/cos.
"""
import importlib.util
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
import philox_reference as ref  # noqa: E402

KERNEL_TEXT = '''
import {package} as tessera
import {package}.language as tl


@tessera.jit
def random_kernel(out_ptr, seed, base, n, BLOCK: tl.constexpr):
    """Eleven blocks of n values: randint4x's four words, randint, rand, randn, rand4x's
    third word, randn4x's four normals."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    counters = base + offs
    r0, r1, r2, r3 = tl.randint4x(seed, counters)
    u0, u1, u2, u3 = tl.rand4x(seed, counters)
    n0, n1, n2, n3 = tl.randn4x(seed, counters)
    tl.store(out_ptr + offs, r0, mask=mask)
    tl.store(out_ptr + n + offs, r1, mask=mask)
    tl.store(out_ptr + 2 * n + offs, r2, mask=mask)
    tl.store(out_ptr + 3 * n + offs, r3, mask=mask)
    tl.store(out_ptr + 4 * n + offs, tl.randint(seed, counters), mask=mask)
    tl.store(out_ptr + 5 * n + offs, tl.rand(seed, counters).to(tl.int32, bitcast=True), mask=mask)
    tl.store(out_ptr + 6 * n + offs, tl.randn(seed, counters).to(tl.int32, bitcast=True), mask=mask)
    tl.store(out_ptr + 7 * n + offs, u2.to(tl.int32, bitcast=True), mask=mask)
    tl.store(out_ptr + 8 * n + offs, n0.to(tl.int32, bitcast=True), mask=mask)
    tl.store(out_ptr + 9 * n + offs, n1.to(tl.int32, bitcast=True), mask=mask)
    tl.store(out_ptr + 10 * n + offs, n3.to(tl.int32, bitcast=True), mask=mask)
'''
BLOCKS = 11


def load_kernel(package: str, directory):
    """The kernel text compiled by `package` (tessera or triton): a file, as both front ends
    read a kernel's source."""
    path = directory / f"random_{package}.py"
    path.write_text(KERNEL_TEXT.format(package=package))
    spec = importlib.util.spec_from_file_location(f"random_{package}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.random_kernel


def launch(kernel, seed: int, base: int, n: int) -> np.ndarray:
    out = torch.full((BLOCKS * n,), -1, dtype=torch.int32, device="cuda")
    kernel[((n + 255) // 256,)](out, seed, base, n, BLOCK=256)
    torch.cuda.synchronize()
    return out.cpu().numpy().view(np.uint32).reshape(BLOCKS, n)


CASES = [(0, 0, 1000), (12345, 0, 4097), (-7, 17, 3001), (2**40 + 3, 0, 999),
         (-(2**50), 2**33 + 5, 2049), (2**31 - 1, 2**31 - 4096, 1531), (0xFFFFFFFF, 3, 777),
         (2**64 - 5, 2**40, 1000)]


@pytest.mark.parametrize("seed, base, n", CASES)
def test_random_against_numpy(tmp_path, seed, base, n):
    out = launch(load_kernel("tessera", tmp_path), seed, base, n)
    offsets = (np.arange(n) + base).astype(np.int64 if base + n > 2**31 - 1 else np.int32)
    words = ref.randint4x(seed, offsets)
    for i in range(4):
        np.testing.assert_array_equal(out[i], words[i])
    np.testing.assert_array_equal(out[4], words[0])
    uniforms = [ref.uniform(w) for w in words]
    np.testing.assert_array_equal(out[5].view(np.float32), uniforms[0])
    np.testing.assert_array_equal(out[7].view(np.float32), uniforms[2])
    n0, n1 = ref.box_muller(uniforms[0], uniforms[1])
    _, n3 = ref.box_muller(uniforms[2], uniforms[3])
    for row, expected in ((6, n0), (8, n0), (9, n1), (10, n3)):
        # sqrt.approx, libdevice logf/cosf/sinf: a few ulp of float32
        np.testing.assert_allclose(out[row].view(np.float32), expected, rtol=5e-6, atol=5e-6)


@pytest.mark.parametrize("seed, base, n", CASES)
def test_random_against_triton(tmp_path, seed, base, n):
    pytest.importorskip("triton")
    ours = launch(load_kernel("tessera", tmp_path), seed, base, n)
    theirs = launch(load_kernel("triton", tmp_path), seed, base, n)
    np.testing.assert_array_equal(ours[:6], theirs[:6])  # integers and uniforms: same bits
    np.testing.assert_array_equal(ours[7], theirs[7])
    for row in (6, 8, 9, 10):
        mine, other = ours[row].view(np.float32), theirs[row].view(np.float32)
        np.testing.assert_allclose(mine, other, rtol=5e-6, atol=5e-6)
        print(f"randn row {row}: {np.mean(mine == other):.4%} of values bit-identical to Triton")
