"""Vector add on the GPU: correctness with PyTorch, CuPy and JAX tensors, bad input, the cache."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import tessera
import tessera.language as tl
from tessera.testing.environment import child_env



@tessera.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


def launch(x, y, out, n, block=1024):
    add_kernel[(tessera.cdiv(n, block),)](x, y, out, n, BLOCK=block)


@pytest.mark.parametrize("n", [1, 17, 1000, 1024, 4097, 98432, (1 << 20) + 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32])
def test_torch(n, dtype):
    gen = torch.Generator(device="cuda").manual_seed(n)
    if dtype.is_floating_point:
        x = torch.randn(n, device="cuda", generator=gen).to(dtype)
        y = torch.randn(n, device="cuda", generator=gen).to(dtype)
        out = torch.full((n,), float("nan"), device="cuda", dtype=dtype)
    else:
        x = torch.randint(-2**30, 2**30, (n,), device="cuda", generator=gen, dtype=dtype)
        y = torch.randint(-2**30, 2**30, (n,), device="cuda", generator=gen, dtype=dtype)
        out = torch.full((n,), -7, device="cuda", dtype=dtype)
    launch(x, y, out, n)
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


@pytest.mark.parametrize("block", [128, 256, 4096])
def test_blocks_and_unaligned_views(block):
    n = 10007
    base = torch.randn(n + 1, device="cuda")
    x = base[1:]                      # 4-byte aligned only: no 16-byte vector access allowed
    y = torch.randn(n, device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    launch(x, y, out, n, block)
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


def test_cupy():
    cp = pytest.importorskip("cupy")
    n = 5003
    x = cp.random.standard_normal(n, dtype=cp.float32)
    y = cp.random.standard_normal(n, dtype=cp.float32)
    out = cp.full(n, cp.nan, dtype=cp.float32)
    launch(x, y, out, n)
    cp.cuda.get_current_stream().synchronize()
    np.testing.assert_array_equal(cp.asnumpy(out), cp.asnumpy(x + y))


def test_jax():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    try:
        gpu = jax.devices("gpu")[0]
    except RuntimeError:
        pytest.skip("JAX has no GPU backend here")
    n = 3001
    key = jax.random.PRNGKey(0)
    x = jax.device_put(jax.random.normal(key, (n,), dtype=jnp.float32), gpu)
    y = jax.device_put(jax.random.normal(jax.random.PRNGKey(1), (n,), dtype=jnp.float32), gpu)
    out = jax.device_put(jnp.full((n,), jnp.nan, dtype=jnp.float32), gpu)
    for array in (x, y, out):
        array.block_until_ready()
    launch(x, y, out, n)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(np.asarray(out), np.asarray(x) + np.asarray(y))


def test_cpu_tensor_is_a_clear_error():
    n = 100
    x = torch.randn(n)
    y = torch.randn(n, device="cuda")
    with pytest.raises(TypeError, match=r"add_kernel.*x_ptr"):
        launch(x, y, y, n)


def test_wrong_argument_count():
    x = torch.randn(10, device="cuda")
    with pytest.raises(TypeError, match="add_kernel"):
        add_kernel[(1,)](x, x, 10, BLOCK=128)


def test_missing_constexpr():
    x = torch.randn(10, device="cuda")
    with pytest.raises(TypeError, match="add_kernel.*BLOCK"):
        add_kernel[(1,)](x, x, x, 10)


def _run_child(code: str, cache_dir) -> subprocess.CompletedProcess:
    script = cache_dir / "child.py"        # a file: kernels need readable source
    script.write_text(textwrap.dedent(code))
    env = child_env(TESSERA_CACHE_DIR=str(cache_dir / "cache"))
    return subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=300)


CHILD = """
import sys, torch, tessera, tessera.language as tl
import tessera.compiler.compiler as cc
compiles = []
original = cc.compile_kernel
def counting(*a, **k):
    compiles.append(1)
    return original(*a, **k)
import tessera.compiler
tessera.compiler.compile_kernel = counting
@tessera.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)
x = torch.randn(3000, device="cuda"); out = torch.empty_like(x)
add_kernel[(3,)](x, x, out, 3000, BLOCK=1024)
assert torch.equal(out, x + x)
print("compiles", len(compiles))
"""


def test_second_process_reuses_cache_and_corruption_recompiles(tmp_path):
    first = _run_child(CHILD, tmp_path)
    assert first.returncode == 0, first.stderr
    assert "compiles 1" in first.stdout
    second = _run_child(CHILD, tmp_path)
    assert second.returncode == 0, second.stderr
    assert "compiles 0" in second.stdout
    cubins = list(tmp_path.rglob("kernel.cubin"))
    assert cubins
    for path in cubins:                     # corrupt every cached cubin
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    third = _run_child(CHILD, tmp_path)
    assert third.returncode == 0, third.stderr
    assert "compiles 1" in third.stdout
