"""Warm starts on the GPU: a fresh process whose kernels (and tuning result) are on disk
launches them without compiling, tokenizing or parsing any source, without running ptxas
(not even ``ptxas --version``) and without timing configs, and gets right results. The time
from the first call to the launched kernel is printed; benchmarks/compile_time.py measures it
against Triton (the target: 20 ms)."""
import json
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

from tessera.testing.environment import child_env

CHILD = textwrap.dedent('''
    import ast, inspect, json, subprocess, sys, time
    import torch, tessera, tessera.language as tl
    from tessera.ops import gemm

    @tessera.jit
    def scale_kernel(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha, mask=mask)

    warm = sys.argv[1] == "warm"
    if warm:  # nothing of a compile, of reading sources or of tuning may run
        def refuse(what):
            def refused(*args, **kwargs):
                raise AssertionError(f"a warm start ran {what}")
            return refused
        import tessera.compiler, tessera.compiler.compiler as cc
        tessera.compiler.compile_kernel = cc.compile_kernel = refuse("the compiler")
        tessera.compiler.build_tile_ir = cc.build_tile_ir = refuse("the front end")
        inspect.getsourcelines = refuse("inspect.getsourcelines")
        ast.parse = refuse("ast.parse")
        subprocess.run = refuse("a subprocess")
        gemm.tuned_matmul_kernel.do_bench = refuse("a benchmark")
    torch.manual_seed(0)
    x = torch.randn(5000, device="cuda")
    out = torch.empty_like(x)
    a = torch.randn(512, 384, device="cuda", dtype=torch.float16)
    b = torch.randn(384, 256, device="cuda", dtype=torch.float16)
    torch.cuda.synchronize()
    start = time.perf_counter()
    scale_kernel[(5,)](x, out, 5000, 3.0, BLOCK=1024)
    torch.cuda.synchronize()
    first = time.perf_counter() - start
    start = time.perf_counter()
    c = gemm.matmul(a, b)
    torch.cuda.synchronize()
    tuned = time.perf_counter() - start
    assert torch.equal(out, x * 3.0)
    reference = a.double() @ b.double()
    error = ((c.double() - reference).norm() / reference.norm()).item()
    assert error < 5e-3, error
    print(json.dumps({"plain_ms": first * 1e3, "autotuned_ms": tuned * 1e3}))
''')


def run_child(tmp_path, mode):
    script = tmp_path / "child.py"  # a file: kernels need readable source
    script.write_text(CHILD)
    done = subprocess.run([sys.executable, str(script), mode],
                          env=child_env(TESSERA_CACHE_DIR=str(tmp_path / "cache")),
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_warm_start_compiles_reads_and_tunes_nothing(tmp_path):
    cold = run_child(tmp_path, "cold")
    warm = [run_child(tmp_path, "warm") for _ in range(3)]
    plain = sorted(w["plain_ms"] for w in warm)[1]
    tuned = sorted(w["autotuned_ms"] for w in warm)[1]
    print(f"first call, cold: {cold['plain_ms']:.1f} ms (plain), {cold['autotuned_ms']:.1f} ms "
          f"(autotuned matmul); warm, median of 3: {plain:.1f} ms, {tuned:.1f} ms")
    # No timing assertion (speed lives in benchmarks/compile_time.py): what a warm start must
    # not do is refused in the child, and its results are checked there.
