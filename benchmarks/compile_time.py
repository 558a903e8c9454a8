"""Cold compile and warm start, Tessera against Triton 3.6, on the same kernel text.

Two kernels, a matmul (128 x 128 x 64 tiles, 4 warps, 3 stages) and an attention forward
(D = 64, 128 x 64 tiles, 8 warps, 2 stages), written once as Triton code (KERNELS below);
only the two import lines differ between the frameworks. Every figure is the median over
fresh processes (imports excluded):

* cold: the first call with an empty disk cache, to the launched kernel (compile included);
* warm: the first call in a fresh process whose disk cache holds the kernel.

With a GPU, both are timed to the end of the launched kernel, for both frameworks. Without one,
cold is the compile to a cubin for sm_90a (Tessera: ``kernel.warmup``; Triton:
``triton.compile`` for ``GPUTarget("cuda", 90, 32)``), and warm is Tessera's Python path up to
the driver (cache key, cache read, metadata, launcher set-up) with the driver calls replaced by
stubs; the real warm-start figures need a GPU. Each figure also gives the CPU seconds of the
process and its ptxas: on a shared machine, what the wall time would be on an idle one.
``--stages`` prints where a cold compile's time goes (CompiledKernel.stage_seconds)::

    python benchmarks/compile_time.py [--runs 5] [--kernels matmul,attention] [--no-triton]
    python benchmarks/compile_time.py --stages
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _use_installed_or_checkout() -> None:
    """The installed Tessera when there is one (the GPU machine's), else this checkout's
    in-tree build: the children measure the same package (tessera.testing.environment)."""
    try:
        import tessera  # noqa: F401
    except ImportError:
        sys.path.insert(0, os.path.join(ROOT, "python"))

IMPORTS = {"tessera": "import tessera as triton\nimport tessera.language as tl\n",
           "triton": "import triton\nimport triton.language as tl\n"}

KERNELS = '''
@triton.jit
def leaky_relu(x):
    return tl.where(x >= 0, x, 0.01 * x)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, bias_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_SIZE_M: tl.constexpr, HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    if HAS_BIAS:
        bias = tl.load(bias_ptr + offs_cn, mask=offs_cn < N, other=0.0)
        accumulator = accumulator + bias.to(tl.float32)[None, :]
    if ACTIVATION == "leaky_relu":
        accumulator = leaky_relu(accumulator)
    c = accumulator.to(c_ptr.dtype.element_ty)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


@triton.jit
def attention_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, qk_scale, H, S,
                         stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks,
                         stride_vb, stride_vh, stride_vs, stride_ob, stride_oh, stride_os,
                         D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    off_bh = tl.program_id(axis=1)
    off_b = off_bh // H
    off_h = off_bh % H
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    q_ptrs = (q_ptr + off_b * stride_qb + off_h * stride_qh + offs_m[:, None] * stride_qs
              + offs_d[None, :])
    k_head = k_ptr + off_b * stride_kb + off_h * stride_kh
    v_head = v_ptr + off_b * stride_vb + off_h * stride_vh
    q = tl.load(q_ptrs, mask=offs_m[:, None] < S, other=0.0)
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, D), dtype=tl.float32)
    hi = tl.minimum((start_m + 1) * BLOCK_M, S) if CAUSAL else S
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + tl.arange(0, BLOCK_N)
        k = tl.load(k_head + cols[:, None] * stride_ks + offs_d[None, :],
                    mask=cols[:, None] < S, other=0.0)
        v = tl.load(v_head + cols[:, None] * stride_vs + offs_d[None, :],
                    mask=cols[:, None] < S, other=0.0)
        qk = tl.dot(q, tl.trans(k))
        keep = cols[None, :] < S
        if CAUSAL:
            keep = keep & (cols[None, :] <= offs_m[:, None])
        qk = tl.where(keep, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, axis=1) * qk_scale)
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk * qk_scale - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = tl.dot(p.to(k.dtype), v, acc * alpha[:, None])
        m_i = m_new
    acc = acc / l_i[:, None]
    o_ptrs = (o_ptr + off_b * stride_ob + off_h * stride_oh + offs_m[:, None] * stride_os
              + offs_d[None, :])
    tl.store(o_ptrs, acc.to(o_ptr.dtype.element_ty), mask=offs_m[:, None] < S)
    tl.store(lse_ptr + off_bh * S + offs_m, m_i + tl.log2(l_i), mask=offs_m < S)
'''

# kernel -> (constexprs, launch options); _cpu_arguments and _gpu_arguments give the launch's
# argument values
MATMUL_N = 1024
ATTN_B, ATTN_H, ATTN_S, ATTN_D = 1, 4, 1024, 64
CASES = {
    "matmul": (dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_SIZE_M=8, HAS_BIAS=False,
                    ACTIVATION=""), dict(num_warps=4, num_stages=3)),
    "attention": (dict(D=ATTN_D, BLOCK_M=128, BLOCK_N=64, CAUSAL=False),
                  dict(num_warps=8, num_stages=2)),
}
KERNEL_NAMES = {"matmul": "matmul_kernel", "attention": "attention_fwd_kernel"}


# ----------------------------------------------------------------------------- the child

def _load_kernels(framework: str, directory: str):
    """The kernel text with this framework's imports, as a module written to a file (both
    front ends read kernels' source from their files)."""
    import importlib.util
    path = os.path.join(directory, f"kernels_{framework}.py")
    text = IMPORTS[framework] + KERNELS
    if not os.path.exists(path):  # kept as it is between the runs of a series, as a user's
        with open(path, "w") as f:
            f.write(text)
    spec = importlib.util.spec_from_file_location(f"kernels_{framework}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _gpu_arguments(kernel: str):
    """(args, grid) of a real launch on torch CUDA tensors."""
    import torch
    if kernel == "matmul":
        n = MATMUL_N
        a, b, c = (torch.randn(n, n, device="cuda", dtype=torch.float16) for _ in range(3))
        grid = ((n // 128) * (n // 128),)
        return (a, b, c, c, n, n, n, *a.stride(), *b.stride(), *c.stride()), grid
    q, k, v, o = (torch.randn(ATTN_B, ATTN_H, ATTN_S, ATTN_D, device="cuda",
                              dtype=torch.float16) for _ in range(4))
    lse = torch.empty(ATTN_B, ATTN_H, ATTN_S, device="cuda", dtype=torch.float32)
    strides = [s for x in (q, k, v, o) for s in x.stride()[:3]]
    return (q, k, v, o, lse, 0.125 * 1.4426950408889634, ATTN_H, ATTN_S, *strides), \
        ((ATTN_S + 127) // 128, ATTN_B * ATTN_H)


def _cpu_arguments(kernel: str):
    """The same launch's arguments as NumPy arrays (the CPU warm path, driver stubbed)."""
    import numpy as np
    if kernel == "matmul":
        n = MATMUL_N
        a = np.zeros((n, n), np.float16)
        st = (n, 1)
        return (a, a, a, a, n, n, n, *st, *st, *st), ((n // 128) * (n // 128),)
    x = np.zeros((ATTN_B, ATTN_H, ATTN_S, ATTN_D), np.float16)
    lse = np.zeros((ATTN_B, ATTN_H, ATTN_S), np.float32)
    st = (ATTN_H * ATTN_S * ATTN_D, ATTN_S * ATTN_D, ATTN_D)
    return (x, x, x, x, lse, 0.18, ATTN_H, ATTN_S, *st * 4), \
        ((ATTN_S + 127) // 128, ATTN_B * ATTN_H)


def _launch_specialization(kernel: str) -> list:
    """The runtime arguments of the launch as a compile without a GPU sees them: pointers by
    type ("*fp16", 16-byte aligned), scalars by value (so ints are specialized as a launch
    specializes them: divisible by 16, equal to 1)."""
    import numpy as np
    codes = {np.dtype(np.float16): "*fp16", np.dtype(np.float32): "*fp32"}
    return [codes[a.dtype] if isinstance(a, np.ndarray) else a
            for a in _cpu_arguments(kernel)[0]]


def _triton_compile(fn, kernel: str):
    """triton.compile for sm_90a, no GPU needed, specialized as Triton specializes the launch:
    pointers and ints divisible by 16 get tt.divisibility, an int equal to 1 is a constexpr."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    constexprs, options = CASES[kernel]
    signature, attrs, constants = {}, {}, dict(constexprs)
    for i, (name, value) in enumerate(zip(fn.arg_names, _launch_specialization(kernel))):
        if isinstance(value, str):
            signature[name] = value
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(value, float):
            signature[name] = "fp32"
        elif value == 1:
            signature[name] = "constexpr"
            constants[name] = 1
        else:
            signature[name] = "i32"
            if value % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
    for name in constexprs:
        signature[name] = "constexpr"
    source = ASTSource(fn, signature, constexprs=constants, attrs=attrs)
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options)


class _StubDriver:
    """Stands in for tessera.runtime.driver where a GPU would be used (CPU warm starts)."""

    def __init__(self, real) -> None:
        self._real = real
        self.ArgumentError = real.ArgumentError

    def __getattr__(self, name):
        return getattr(self._real, name)

    @staticmethod
    def driver_available():
        return True, ""

    @staticmethod
    def current_stream(*args):
        return 0

    @staticmethod
    def load_module(image, device):
        assert isinstance(image, bytes) and image
        return type("Module", (), {"function": staticmethod(lambda name: name)})()

    class KernelLauncher:
        def __init__(self, kinds, function, num_warps, shared_bytes) -> None:
            self.kinds = kinds

        def launch(self, grid, stream, args) -> None:
            assert len(args) == len(self.kinds)


def _stub_the_driver(kernel_fn) -> None:
    from tessera.runtime import launcher
    launcher.driver = _StubDriver(launcher.driver)
    launcher.arch_of = lambda device: "sm_90a"
    launcher._device_and_framework = lambda kernel, names, values: (0, "other")
    kernel_fn._dispatch_register = lambda *args, **kwargs: None


def _cpu_seconds() -> float:
    """CPU seconds of this process and its finished children (ptxas) so far."""
    import resource
    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                        resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def child(framework: str, kernel: str, mode: str, gpu: bool) -> tuple:
    """(wall, CPU) seconds of the first call (imports, tensors and the kernel module made
    before). CPU seconds count this process and ptxas: on a shared machine they say what
    the wall time would be on an idle one. ``mode`` ("cold", "warm") only names the run: the
    state of the cache directory (TESSERA_CACHE_DIR, also Triton's) makes it one or the other."""
    # The kernel file lives beside the cache of its series (run_child): it stays the same
    # file between the fresh processes of one series, as a user's kernel file does.
    module = _load_kernels(framework, os.path.dirname(os.environ["TESSERA_CACHE_DIR"]))
    fn = getattr(module, KERNEL_NAMES[kernel])
    constexprs, options = CASES[kernel]
    if gpu:
        import torch
        args, grid = _gpu_arguments(kernel)
        torch.cuda.synchronize()

        def call():
            fn[grid](*args, **constexprs, **options)
            torch.cuda.synchronize()
    elif framework == "triton":
        def call():
            assert _triton_compile(fn, kernel).asm["cubin"]
    else:
        args, grid = _cpu_arguments(kernel)
        _stub_the_driver(fn)

        def call():
            fn[grid](*args, **constexprs, **options)  # the Python path; compiles when cold
    cpu, start = _cpu_seconds(), time.perf_counter()
    call()
    return time.perf_counter() - start, _cpu_seconds() - cpu


# ----------------------------------------------------------------------------- the parent

def _gpu_available() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


def run_child(framework: str, kernel: str, mode: str, cache: str, gpu: bool) -> tuple:
    from tessera.testing.environment import child_env
    env = child_env(TESSERA_CACHE_DIR=cache, TRITON_CACHE_DIR=cache)
    # An installed package has its bytecode: let the children keep theirs too.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.setdefault("PYTHONPYCACHEPREFIX", os.path.join(tempfile.gettempdir(),
                                                       "tessera-bench-pycache"))
    code = (f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r});"
            f"import compile_time as c, json; print('SECONDS', json.dumps(c.child({framework!r}, "
            f"{kernel!r}, {mode!r}, {gpu!r})))")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=600)
    for line in done.stdout.splitlines():
        if line.startswith("SECONDS "):
            return tuple(json.loads(line.split(" ", 1)[1]))
    raise RuntimeError(f"{framework} {kernel} {mode} failed:\n{done.stdout}\n{done.stderr}")


def measure(framework: str, kernel: str, runs: int, gpu: bool) -> dict:
    cold = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="compile-time-") as series:
            cold.append(run_child(framework, kernel, "cold", os.path.join(series, "cache"),
                                  gpu))
    warm = []
    if gpu or framework == "tessera":
        with tempfile.TemporaryDirectory(prefix="compile-time-") as series:
            cache = os.path.join(series, "cache")
            run_child(framework, kernel, "cold", cache, gpu)  # fills the cache
            warm = [run_child(framework, kernel, "warm", cache, gpu) for _ in range(runs)]
    def median(runs, which):
        return statistics.median(r[which] for r in runs) if runs else None

    return {"cold": median(cold, 0), "warm": median(warm, 0), "cold_cpu": median(cold, 1),
            "warm_cpu": median(warm, 1), "cold_all": cold, "warm_all": warm}


def stages(kernel: str) -> None:
    """One cold compile to a cubin in this process, stage by stage."""
    module = _load_kernels("tessera", os.path.dirname(os.environ["TESSERA_CACHE_DIR"]))
    fn = getattr(module, KERNEL_NAMES[kernel])
    constexprs, options = CASES[kernel]
    start = time.perf_counter()
    compiled = fn.warmup(*_launch_specialization(kernel), **constexprs, **options, grid=(1,))
    total = time.perf_counter() - start
    print(f"{kernel}: {total * 1e3:.1f} ms from warmup() to the cubin")
    for name, seconds in compiled.stage_seconds.items():
        print(f"  {name:30s} {seconds * 1e3:8.1f} ms")
    print(f"  {'outside compile_kernel':30s} "
          f"{(total - sum(compiled.stage_seconds.values())) * 1e3:8.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per figure")
    parser.add_argument("--kernels", default="matmul,attention")
    parser.add_argument("--no-triton", action="store_true")
    parser.add_argument("--stages", action="store_true", help="one cold compile, by stage")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    kernels = args.kernels.split(",")
    _use_installed_or_checkout()
    if args.stages:
        os.environ["TESSERA_CACHE_DIR"] = os.path.join(
            tempfile.mkdtemp(prefix="compile-time-"), "cache")
        for kernel in kernels:
            stages(kernel)
        return 0
    gpu = _gpu_available()
    frameworks = ["tessera"]
    if not args.no_triton:
        try:
            import triton  # noqa: F401
            frameworks.append("triton")
        except ImportError:
            print("Triton is not installed (pip install triton==3.6.0): Tessera only")
    warm_scope = ("to the launched kernel" if gpu
                  else "(Tessera, up to the driver; the real figures need a GPU)")
    print(f"{'GPU' if gpu else 'no GPU'}: cold = first call with an empty cache "
          f"{'to the launched kernel' if gpu else '(compile to a sm_90a cubin)'}; warm = first "
          f"call with a warm cache {warm_scope}; "
          f"median of {args.runs} fresh processes each, imports excluded")
    figures = {}
    for kernel in kernels:
        for framework in frameworks:
            result = measure(framework, kernel, args.runs, gpu)
            figures[f"{framework}/{kernel}"] = result
            warm = (f"{result['warm'] * 1e3:8.1f} ms (CPU {result['warm_cpu'] * 1e3:6.1f})"
                    if result["warm"] is not None else "   (needs a GPU)")
            print(f"{kernel:10s} {framework:8s} cold {result['cold'] * 1e3:8.1f} ms "
                  f"(CPU {result['cold_cpu'] * 1e3:6.1f})   warm {warm}", flush=True)
        if "triton" in frameworks:
            t, r = figures[f"tessera/{kernel}"], figures[f"triton/{kernel}"]
            line = (f"{kernel:10s} Triton / Tessera: cold x{r['cold'] / t['cold']:.2f} "
                    f"(CPU x{r['cold_cpu'] / t['cold_cpu']:.2f})")
            if r["warm"] is not None and t["warm"]:
                line += f", warm x{r['warm'] / t['warm']:.1f}"
            print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": gpu, "figures": figures}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
