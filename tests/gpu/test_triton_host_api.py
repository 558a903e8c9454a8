"""Triton's host API on a GPU, with `import tessera as triton`: driver.active against PyTorch's
view of the device, launch options (num_ctas, maxnreg, enable_fp_fusion) with results checked
against float64 references, do_not_specialize compiling once while launching through the C++
fast path, None for a pointer, a parameter named num_warps, warmup then launch without a
recompile, debug device asserts, testing.assert_close and do_bench_cudagraph."""
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import tessera as triton  # noqa: E402
import tessera.language as tl  # noqa: E402
from tessera.jit import JITFunction  # noqa: E402
from tessera.testing.environment import child_env


@pytest.fixture
def python_calls(monkeypatch):
    """Counts the launches that took the Python path (JITFunction.run)."""
    calls = []
    original = JITFunction.run

    def counting(self, *args, **kwargs):
        calls.append(self.__name__)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(JITFunction, "run", counting)
    return calls


@pytest.fixture
def compiles(monkeypatch):
    """Counts compilations (the launcher's prepare of a new specialization)."""
    from tessera.runtime import launcher
    calls = []
    original = launcher.prepare

    def counting(jit_fn, *args, **kwargs):
        calls.append(jit_fn.__name__)
        return original(jit_fn, *args, **kwargs)

    monkeypatch.setattr(launcher, "prepare", counting)
    return calls


def test_driver_active_matches_torch():
    active = triton.runtime.driver.active
    device = active.get_current_device()
    assert device == torch.cuda.current_device()
    assert active.get_current_stream(device) == torch.cuda.current_stream(device).cuda_stream
    props = torch.cuda.get_device_properties(device)
    target = active.get_current_target()
    assert (target.backend, target.arch, target.warp_size) == \
        ("cuda", props.major * 10 + props.minor, 32)
    mine = active.utils.get_device_properties(device)
    assert mine["multiprocessor_count"] == props.multi_processor_count
    assert mine["warpSize"] == 32 and mine["max_num_regs"] >= 65536
    assert mine["max_shared_mem"] >= 48 * 1024 and mine["sm_clock_rate"] > 0
    assert mine["mem_clock_rate"] > 0 and mine["mem_bus_width"] > 0
    assert active.get_active_torch_device() == torch.device("cuda", device)
    assert active.is_active()


@triton.jit
def fma_kernel(a_ptr, b_ptr, c_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(a_ptr + offs, mask=m)
    b = tl.load(b_ptr + offs, mask=m)
    c = tl.load(c_ptr + offs, mask=m)
    tl.store(out_ptr + offs, a * b + c, mask=m)


def test_enable_fp_fusion_rounds_like_fma_or_like_mul_then_add():
    n = random.randrange(5000, 20000)
    gen = torch.Generator(device="cuda").manual_seed(random.randrange(2**31))
    a, b, c = (torch.randn(n, device="cuda", generator=gen) for _ in range(3))
    out = torch.empty_like(a)
    grid = (triton.cdiv(n, 512),)
    a64, b64, c64 = (t.cpu().numpy().astype(np.float64) for t in (a, b, c))
    # float32 products are exact in float64, so these round as fma does (one rounding; a
    # second rounding to float32 differs only on exact float32 midpoints, about 2^-29 of
    # random inputs) and as mul then add (a rounding after each).
    fused = (a64 * b64 + c64).astype(np.float32)
    split = ((a64 * b64).astype(np.float32).astype(np.float64) + c64).astype(np.float32)
    fma_kernel[grid](a, b, c, out, n, BLOCK=512)
    np.testing.assert_array_equal(out.cpu().numpy(), fused)
    fma_kernel[grid](a, b, c, out, n, BLOCK=512, enable_fp_fusion=False)
    np.testing.assert_array_equal(out.cpu().numpy(), split)


@triton.jit
def heavy(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(a_ptr + offs, mask=m)
    b = tl.load(b_ptr + offs, mask=m)
    c = tl.load(a_ptr + n + offs, mask=m)
    d = tl.load(b_ptr + n + offs, mask=m)
    tl.store(out_ptr + offs, a * b + c * d + a * d, mask=m)


def test_maxnreg_caps_registers_and_keeps_results(python_calls):
    n = 4096 * 3 + 17
    a, b = torch.randn(2 * n, device="cuda"), torch.randn(2 * n, device="cuda")
    out = torch.empty(n, device="cuda")
    grid = (triton.cdiv(n, 4096),)
    capped = heavy.warmup(a, b, out, n, BLOCK=4096, grid=grid, maxnreg=40)
    free = heavy.warmup(a, b, out, n, BLOCK=4096, grid=grid)
    assert capped.n_regs <= 40 < free.n_regs
    before = python_calls.count("heavy")            # warmup runs through run() too
    for _ in range(3):
        out.zero_()
        heavy[grid](a, b, out, n, BLOCK=4096, maxnreg=40, num_ctas=1)
        x, y = a.double(), b.double()
        ref = x[:n] * y[:n] + x[n:] * y[n:] + x[:n] * y[n:]
        triton.testing.assert_close(out, ref.float(), atol=1e-5, rtol=1e-5)
    assert python_calls.count("heavy") == before + 1  # later launches: the C++ fast path
    kernel = next(k for key, k in heavy._kernels.items() if key[2].maxnreg == 40)
    assert kernel.metadata["registers"] <= 40
    with pytest.raises(ValueError, match="num_ctas=2"):
        heavy[grid](a, b, out, n, BLOCK=4096, num_ctas=2)


def test_do_not_specialize_compiles_once_and_launches_fast(python_calls, compiles):
    @triton.jit(do_not_specialize=["n", "scale"])
    def scale_kernel(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * scale, mask=m)

    sizes = [1, 16, 17, 32, 4097, 1, 160, 333]
    x = torch.randn(max(sizes), device="cuda")
    for n in sizes:
        out = torch.full_like(x, float("nan"))
        scale_kernel[(triton.cdiv(n, 256),)](x, out, n, 1, BLOCK=256)
        torch.testing.assert_close(out[:n], x[:n])
        assert out[n:].isnan().all()
    assert compiles.count("scale_kernel") == 1
    assert python_calls.count("scale_kernel") == 1


def test_none_pointer_and_num_warps_parameter():
    @triton.jit
    def add_bias(x_ptr, bias_ptr, out_ptr, n, num_warps: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        if bias_ptr is not None:
            x += tl.load(bias_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x * num_warps, mask=mask)

    n = random.randrange(1000, 5000)
    x, bias = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    grid = (triton.cdiv(n, 256),)
    for _ in range(2):
        add_bias[grid](x, None, out, n, num_warps=2, BLOCK=256)
        torch.testing.assert_close(out, x * 2)
        add_bias[grid](x, bias, out, n, num_warps=8, BLOCK=256)
        torch.testing.assert_close(out, (x + bias) * 8)
    assert {key[2].num_warps for key in add_bias._kernels} == {2, 8}


def test_warmup_then_launch_does_not_compile_again(monkeypatch):
    @triton.jit
    def copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    compiled = copy.warmup(torch.float32, torch.float32, 1000, BLOCK=256, grid=(4,))
    assert compiled.name == "copy" and compiled.n_regs > 0
    from tessera import compiler
    monkeypatch.setattr(compiler.compiler, "compile_kernel",
                        lambda *a, **k: pytest.fail("compiled again after warmup"))
    from tessera.runtime import launcher
    monkeypatch.setattr(launcher, "compile_and_store",
                        lambda *a, **k: pytest.fail("compiled again after warmup"))
    x = torch.randn(1000, device="cuda")
    out = torch.empty_like(x)
    copy[(4,)](x, out, 1000, BLOCK=256)
    torch.testing.assert_close(out, x)


def test_debug_assert_fires_only_with_debug(tmp_path):
    script = tmp_path / "assert_kernel.py"
    script.write_text(textwrap.dedent("""
        import sys
        import torch
        import tessera as triton
        import tessera.language as tl

        @triton.jit
        def checked(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
            tl.device_assert(x < 1.0, "x reached one")

        x = torch.ones(64, device="cuda")
        checked[(1,)](x, 64, BLOCK=64, debug=sys.argv[1] == "debug")
        torch.cuda.synchronize()
        print("finished")
    """))
    quiet = subprocess.run([sys.executable, str(script), "plain"], capture_output=True,
                           text=True, env=_env())
    assert quiet.returncode == 0 and "finished" in quiet.stdout, quiet.stderr
    loud = subprocess.run([sys.executable, str(script), "debug"], capture_output=True, text=True,
                          env=_env())
    assert loud.returncode != 0 and "x reached one" in loud.stdout + loud.stderr


def _env():
    return child_env()


def test_do_bench_cudagraph_times_a_kernel():
    n = 1 << 20
    x = torch.randn(n, device="cuda")
    out = torch.empty_like(x)

    def run():
        fma_kernel[(triton.cdiv(n, 1024),)](x, x, x, out, n, BLOCK=1024)

    ms = triton.testing.do_bench_cudagraph(run, rep=20)
    eager = triton.testing.do_bench(run, warmup=5, rep=20)
    assert 0 < ms < 10 and 0 < eager < 10
    p50, p20, p80 = triton.testing.do_bench_cudagraph(run, rep=10, quantiles=[0.5, 0.2, 0.8])
    assert p20 <= p50 <= p80
    triton.testing.assert_close(out, x * x + x, atol=1e-5, rtol=1e-5)
