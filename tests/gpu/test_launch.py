"""The C++ fast launch path on a GPU (cpp/bindings/launch.cpp): one kernel launched with many
argument mixes (dtypes, unaligned views, ints that are 1 or multiples of 16, keywords), each
result checked against a float64 reference; launches on torch's current stream, inside CUDA
graph capture, with CuPy arrays; clear errors once the fast path is hot; host launch overhead
with 3 and 16 arguments against Triton."""
import importlib.util
import math
import os
import random
import tempfile
import time

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import tessera  # noqa: E402
import tessera.language as tl  # noqa: E402
from tessera._tessera import runtime as _runtime  # noqa: E402
from tessera.jit import JITFunction  # noqa: E402

TOLERANCE = {torch.float32: 1e-5, torch.float16: 5e-3, torch.bfloat16: 1e-2}


@tessera.jit
def axpby(out_ptr, x_ptr, y_ptr, n, alpha, beta, add_one, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=mask).to(tl.float32)
    result = x * alpha + y * beta + add_one.to(tl.float32)
    tl.store(out_ptr + offs, result.to(out_ptr.dtype.element_ty), mask=mask)


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


def tensors(n, dtype, offset, gen):
    """x, y (views starting `offset` elements into their storage) and a poisoned output."""
    x = torch.randn(n + offset, device="cuda", generator=gen).to(dtype)[offset:]
    y = torch.randn(n + offset, device="cuda", generator=gen).to(dtype)[offset:]
    out = torch.full((n + offset,), float("nan"), device="cuda", dtype=dtype)[offset:]
    return out, x, y


def check(out, x, y, alpha, beta, add_one):
    reference = x.double() * alpha + y.double() * beta + float(add_one)
    error = (out.double() - reference).norm() / reference.norm()
    assert not out.isnan().any() and error < TOLERANCE[out.dtype], error.item()


def launch(out, x, y, n, alpha, beta, add_one, block, by_keyword):
    grid = (tessera.cdiv(n, block),)
    if by_keyword:
        axpby[grid](y_ptr=y, x_ptr=x, out_ptr=out, add_one=add_one, beta=beta, alpha=alpha,
                    n=n, BLOCK=block)
    else:
        axpby[grid](out, x, y, n, alpha, beta, add_one, BLOCK=block)


def test_many_argument_mixes_give_right_results(python_calls):
    seed = random.randrange(2**31)
    print(f"seed {seed}")
    rng, gen = random.Random(seed), torch.Generator(device="cuda").manual_seed(seed)
    # A few specializations (each compiles once), each launched again with fresh inputs.
    mixes = [(dtype, offset, n_kind, block) for dtype in TOLERANCE for offset in (0, 1)
             for n_kind, block in (("div16", 128), ("odd", 1024))]
    rng.shuffle(mixes)
    for round_ in range(3):
        for dtype, offset, n_kind, block in mixes:
            n = 16 * rng.randrange(1, 500) if n_kind == "div16" else 2 * rng.randrange(8, 5000) + 1
            out, x, y = tensors(n, dtype, offset, gen)
            # beta never 0 or 1: those are specializations of their own (divisible by 16, 1).
            alpha, beta, add_one = rng.uniform(-2, 2), rng.choice([-3, 2, 5]), rng.random() < 0.5
            launch(out, x, y, n, alpha, beta, add_one, block, by_keyword=rng.random() < 0.5)
            check(out, x, y, alpha, beta, add_one)
    # n == 1 is its own specialization too.
    out, x, y = tensors(1, torch.float32, 0, gen)
    for _ in range(2):
        launch(out, x, y, 1, 0.5, 2, True, 128, by_keyword=False)
        check(out, x, y, 0.5, 2, True)
    # The Python path ran once per specialization (add_one True/False share the i1 kind); all
    # other launches were C++ only.
    assert axpby._dispatch_entries() >= len(mixes) + 1
    assert len(python_calls) <= len(mixes) + 1 + 1   # + 1: a JITFunction made since


def test_cuda_tensors_are_read_in_place_and_again_at_each_launch(python_calls):
    """torch tensors are read in place (their at::Tensor, cpp/bindings/python_torch_tensor.h),
    not through torch's DLPack exchange call; the same Python objects given new storage, a new
    alignment or a new dtype (`.data = ...`) between fast launches get the right kernel."""
    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        pytest.skip("this torch has no DLPack exchange table")
    gen = torch.Generator(device="cuda").manual_seed(random.randrange(2**31))
    n = 1000
    out, x, y = tensors(n, torch.float32, 0, gen)
    launch(out, x, y, n, 1.5, 2, False, 128, by_keyword=False)
    assert _runtime.fast_tensor_read(x) == "in place"
    for dtype, offset in ((torch.float32, 1), (torch.float16, 0), (torch.float32, 0)):
        new_out, new_x, new_y = tensors(n, dtype, offset, gen)
        out.data, x.data, y.data = new_out, new_x, new_y
        for _ in range(2):  # the second launch of each takes the fast path
            out.fill_(float("nan"))
            launch(out, x, y, n, 1.5, 2, False, 128, by_keyword=False)
            check(out, x, y, 1.5, 2, False)


def test_launches_go_to_torchs_current_stream(python_calls):
    n = 100_000
    gen = torch.Generator(device="cuda").manual_seed(1)
    out, x, y = tensors(n, torch.float32, 0, gen)
    launch(out, x, y, n, 2.0, 1, False, 1024, by_keyword=False)     # registered
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        assert _runtime.exchange_current_stream(torch.Tensor, 0) == side.cuda_stream
        x.mul_(3.0)                               # queued on `side`, before the kernel
        launch(out, x, y, n, 2.0, 1, False, 1024, by_keyword=False)
    side.synchronize()
    check(out, x, y, 2.0, 1, False)
    assert _runtime.exchange_current_stream(torch.Tensor, 0) == \
        torch.cuda.current_stream().cuda_stream


def test_cuda_graph_capture_and_replay(python_calls):
    n = 50_000
    gen = torch.Generator(device="cuda").manual_seed(2)
    out, x, y = tensors(n, torch.float16, 0, gen)
    out2 = torch.empty_like(out)
    for _ in range(2):                            # compiled, registered, then fast
        launch(out, x, y, n, 1.5, 2, True, 1024, by_keyword=False)
        launch(out2, out, y, n, -1.0, 1, False, 1024, by_keyword=True)
    torch.cuda.synchronize()
    calls_before = len(python_calls)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):                 # no sync, no allocation on the launch path
        launch(out, x, y, n, 1.5, 2, True, 1024, by_keyword=False)
        launch(out2, out, y, n, -1.0, 1, False, 1024, by_keyword=True)
    assert len(python_calls) == calls_before      # captured through the fast path
    for _ in range(2):
        x.copy_(torch.randn(n, device="cuda", generator=gen))
        out.fill_(float("nan"))
        out2.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        check(out, x, y, 1.5, 2, True)
        check(out2, out, y, -1.0, 1, False)


def test_errors_are_clear_once_the_fast_path_is_hot():
    gen = torch.Generator(device="cuda").manual_seed(3)
    out, x, y = tensors(1000, torch.float32, 0, gen)
    for _ in range(2):
        launch(out, x, y, 1000, 1.0, 1, False, 128, by_keyword=False)
    with pytest.raises(TypeError, match=r"axpby: argument 'x_ptr'.*(cpu|CPU)"):
        launch(out, x.cpu(), y, 1000, 1.0, 1, False, 128, by_keyword=False)
    with pytest.raises(TypeError, match="axpby"):
        axpby[(8,)](out, x, y, 1000, 1.0, 1, BLOCK=128)
    with pytest.raises(TypeError, match=r"axpby: argument 'n'"):
        axpby[(8,)](out, x, y, "1000", 1.0, 1, False, BLOCK=128)


def test_cupy_arrays():
    cp = pytest.importorskip("cupy")
    n = 5003
    x = cp.random.standard_normal(n, dtype=cp.float32)
    y = cp.random.standard_normal(n, dtype=cp.float32)
    for _ in range(3):
        out = cp.full(n, cp.nan, dtype=cp.float32)
        axpby[(tessera.cdiv(n, 256),)](out, x, y, n, 0.5, 2, True, BLOCK=256)
        cp.cuda.get_current_stream().synchronize()
        reference = x.astype(cp.float64) * 0.5 + y.astype(cp.float64) * 2 + 1
        assert float(cp.linalg.norm(out - reference) / cp.linalg.norm(reference)) < 1e-5


# ----------------------------------------------------------------------- launch overhead

@tessera.jit
def axpy(out_ptr, x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    result = tl.load(x_ptr + offs, mask=mask) * alpha + tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, result, mask=mask)


def test_packed_launch_repeats_the_kernel_with_its_parameters():
    """driver.packed_launch (the driver floor of benchmarks/launch_overhead.py) launches the
    very kernel Tessera launched, with parameters packed once, on the stream it was given."""
    from tessera.runtime import driver

    gen = torch.Generator(device="cuda").manual_seed(11)
    n = 3001
    out, x, y = tensors(n, torch.float32, 0, gen)
    axpy[(tessera.cdiv(n, 256),)](out, x, y, n, 0.5, BLOCK=256)  # compiles, loads, registers
    torch.cuda.synchronize()
    check(out, x, y, 0.5, 1, False)
    (launchable,) = axpy._kernels.values()
    out2, x2, y2 = tensors(n, torch.float32, 0, gen)
    stream = torch.cuda.Stream()
    torch.cuda.synchronize()  # the inputs were made on the default stream
    floor = driver.packed_launch(launchable.launcher, (tessera.cdiv(n, 256),),
                                 stream.cuda_stream, [out2, x2, y2, n, -1.5])
    for _ in range(2):
        floor()
    stream.synchronize()
    check(out2, x2, y2, -1.5, 1, False)
    with pytest.raises(TypeError, match="no arguments"):
        floor(1)


def empty_kernels(num_args: int, module_name: str, decorator: str):
    """An empty kernel of `num_args` pointer arguments, in a file (kernels need source)."""
    names = ", ".join(f"p{i}" for i in range(num_args))
    source = f"{decorator}\ndef empty({names}, BLOCK: tl.constexpr):\n    pass\n"
    path = os.path.join(tempfile.mkdtemp(prefix="tessera-launch-"), f"{module_name}.py")
    header = ("import tessera\nimport tessera.language as tl\n" if "tessera" in decorator else
              "import triton\nimport triton.language as tl\n")
    with open(path, "w") as file:
        file.write(header + source)
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.empty


def host_us_per_launch(kernel, args, launches=20_000, repeats=3) -> float:
    for _ in range(100):
        kernel[(1,)](*args, BLOCK=128)
    best = math.inf
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(launches):
            kernel[(1,)](*args, BLOCK=128)
        best = min(best, (time.perf_counter() - start) / launches)
    torch.cuda.synchronize()
    return best * 1e6


def test_launch_overhead_is_flat_and_below_triton():
    args = [torch.empty(16, device="cuda") for _ in range(16)]
    ours = {k: host_us_per_launch(empty_kernels(k, f"tessera_empty{k}", "@tessera.jit"),
                                  args[:k]) for k in (3, 16)}
    print(f"\ntessera @jit launch: 3 args {ours[3]:.2f} us, 16 args {ours[16]:.2f} us")
    assert ours[16] < 2 * ours[3]
    if importlib.util.find_spec("triton") is None:
        return
    theirs = {k: host_us_per_launch(empty_kernels(k, f"triton_empty{k}", "@triton.jit"),
                                    args[:k]) for k in (3, 16)}
    print(f"triton @jit launch: 3 args {theirs[3]:.2f} us, 16 args {theirs[16]:.2f} us")
    assert ours[3] < theirs[3] and ours[16] < theirs[16]
