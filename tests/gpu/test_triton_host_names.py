"""Triton 3.6 host names on the GPU: tessera.compile(ASTSource) for the device's arch,
AsyncCompileMode compiles then launches, triton.testing's device helpers against the
driver's properties, reinterpret through tessera.runtime."""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import tessera  # noqa: E402
import tessera.language as tl  # noqa: E402
from tessera import runtime, testing  # noqa: E402
from tessera.compiler import ASTSource  # noqa: E402


@tessera.jit
def scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * factor, mask=mask)


def test_compile_for_the_device():
    target = runtime.driver.active.get_current_target()
    src = ASTSource(scale_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32",
                                   "factor": "fp32", "BLOCK": "constexpr"}, {"BLOCK": 256})
    compiled = tessera.compile(src, target=target)
    assert compiled.n_spills == 0 and "cubin" in compiled.asm


@pytest.mark.parametrize("n", [1, 1000])
def test_async_compile_then_launch(n):
    x = torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    with ThreadPoolExecutor(4) as executor:
        with tessera.AsyncCompileMode(executor):
            futures = [scale_kernel.warmup(x, out, n, 3.0, BLOCK=b, grid=(1,))
                       for b in (128, 256)]
    assert all(f.result().n_spills == 0 for f in futures)
    scale_kernel[(tessera.cdiv(n, 128),)](x, out, n, 3.0, BLOCK=128)
    np.testing.assert_array_equal(out.cpu().numpy(), x.cpu().numpy() * np.float32(3))


def test_device_helpers():
    props = runtime.driver.active.utils.get_device_properties(torch.cuda.current_device())
    assert testing.get_dram_gbps() == pytest.approx(
        props["mem_clock_rate"] * props["mem_bus_width"] * 2 / 8e6)
    clock = props["sm_clock_rate"]
    assert testing.get_max_tensorcore_tflops(torch.float16, clock) == pytest.approx(
        props["multiprocessor_count"] * 4 * clock * 512 * 1e-9)
    assert testing.get_max_simd_tflops(torch.float32, clock) == pytest.approx(
        props["multiprocessor_count"] * 4 * clock * 32 * 1e-9)
    try:
        sm_clock = testing.nvsmi(["clocks.max.sm"])[0]
    except RuntimeError:
        pytest.skip("no nvidia-smi")
    assert abs(sm_clock * 1000 - clock) < 0.2 * clock


def test_runtime_reinterpret():
    n = 777
    bits = torch.randn(n, device="cuda").view(torch.int32)
    out = torch.empty(n, device="cuda")
    scale_kernel[(tessera.cdiv(n, 128),)](runtime.reinterpret(bits, tl.float32), out, n, 2.0,
                                          BLOCK=128)
    np.testing.assert_array_equal(out.cpu().numpy(), bits.view(torch.float32).cpu().numpy() * 2)
