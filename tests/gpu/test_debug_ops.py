"""tl.device_print and tl.device_assert on the GPU, each in a child process (device printf
writes to the process's C stdout; a failed device assert leaves the CUDA context unusable):
the GPU prints the same lines as the interpreter (in another order), and an assert that fails
stops the kernel with the CUDA runtime's message naming the file, line and message; in debug
mode only (@jit(debug=True) or TESSERA_DEBUG=1), as Triton.
"""
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

from tessera.testing.environment import child_env  # noqa: E402

PROGRAM = textwrap.dedent("""
    import sys
    import numpy as np
    import torch
    import tessera
    import tessera.language as tl

    @tessera.jit(debug=True)  # device asserts build code in debug mode only
    def debug_kernel(x_ptr, u_ptr, n, LIMIT: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=-1.0)
        tl.device_print("x", x, n)
        tl.device_print("u", tl.load(u_ptr + offs), hex=True)
        tl.device_assert(x < LIMIT, "x over the limit")

    rng = np.random.default_rng(0)
    x = rng.standard_normal(300).astype(np.float32)  # 2 programs of 256, the last partial
    u = rng.integers(-2**31, 2**31, 512).astype(np.int32)  # hex prints the bits
    limit = float(sys.argv[2])
    if sys.argv[1] == "gpu":
        debug_kernel[(2,)](torch.from_numpy(x).cuda(), torch.from_numpy(u).cuda(), 300,
                           LIMIT=limit, BLOCK=256)
        torch.cuda.synchronize()
    else:
        tessera.config.knobs.interpret = True
        debug_kernel[(2,)](x, u, 300, LIMIT=limit, BLOCK=256)
""")


def run(where: str, limit: float, directory, debug: bool = True) -> subprocess.CompletedProcess:
    script = directory / "debug_program.py"  # a file: the front end reads kernel source
    # debug=False: the kernel without @jit(debug=True), its assert compiled to nothing
    script.write_text(PROGRAM if debug else PROGRAM.replace("@tessera.jit(debug=True)",
                                                            "@tessera.jit"))
    env = dict(child_env(), TESSERA_DEBUG="0")
    return subprocess.run([sys.executable, str(script), where, str(limit)], env=env,
                          capture_output=True, text=True, timeout=300)


def test_gpu_prints_the_interpreters_lines(tmp_path):
    gpu, cpu = run("gpu", 100.0, tmp_path), run("interpreter", 100.0, tmp_path)
    assert gpu.returncode == 0, gpu.stderr
    assert cpu.returncode == 0, cpu.stderr
    expected = cpu.stdout.splitlines()
    assert len(expected) == 2 * (256 + 1 + 256)  # per program: x, n once, u
    assert sorted(gpu.stdout.splitlines()) == sorted(expected)


def test_failed_device_assert_stops_the_kernel(tmp_path):
    gpu = run("gpu", 0.0, tmp_path)  # standard normal values: some are >= 0
    assert gpu.returncode != 0
    assert "x over the limit" in gpu.stdout + gpu.stderr
    cpu = run("interpreter", 0.0, tmp_path)
    assert cpu.returncode != 0 and "KernelAssertionError" in cpu.stderr


def test_device_assert_builds_nothing_without_debug(tmp_path):
    """As Triton without TRITON_DEBUG: the same failing assert neither stops the kernel nor
    prints; with TESSERA_DEBUG=1 it does again."""
    for where in ("gpu", "interpreter"):
        result = run(where, 0.0, tmp_path, debug=False)
        assert result.returncode == 0, result.stderr
        assert "x over the limit" not in result.stdout + result.stderr
    script = tmp_path / "debug_program.py"
    env = child_env(TESSERA_DEBUG="1", TESSERA_CACHE_DIR=str(tmp_path / "cache"))
    knob = subprocess.run([sys.executable, str(script), "gpu", "0.0"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert knob.returncode != 0 and "x over the limit" in knob.stdout + knob.stderr


POINTER_PROGRAM = textwrap.dedent("""
    import torch
    import tessera
    import tessera.language as tl

    @tessera.jit
    def pointer_print(x_ptr, BLOCK: tl.constexpr):
        tl.device_print("ptr ", x_ptr + tl.arange(0, BLOCK) * 3)

    x = torch.zeros(200, dtype=torch.int32, device="cuda")
    print("BASE", x.data_ptr(), flush=True)
    pointer_print[(1,)](x, BLOCK=64)
    torch.cuda.synchronize()
""")


def test_gpu_prints_pointer_addresses(tmp_path):
    # As Triton: a pointer prints its device address (%p); element i is base + 4 * 3 * i.
    script = tmp_path / "pointer_program.py"
    script.write_text(POINTER_PROGRAM)
    done = subprocess.run([sys.executable, str(script)], env=child_env(), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    base = int(next(line for line in lines if line.startswith("BASE")).split()[1])
    printed = sorted(line for line in lines if line.startswith("pid"))
    assert printed == sorted(f"pid (0, 0, 0) idx ({i:>2}) ptr: {hex(base + 12 * i)}"
                             for i in range(64))


OVERFLOW_PROGRAM = textwrap.dedent("""
    import sys
    import torch
    import tessera
    import tessera.language as tl

    @tessera.jit(debug=True)
    def gather_rows(x_ptr, out_ptr, stride, n, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        offs = row * stride + tl.arange(0, BLOCK)  # wraps for row 2 when stride is 2**30
        mask = offs < n  # a wrapped offset is negative: the mask lets it through
        tl.store(out_ptr + row * BLOCK + tl.arange(0, BLOCK), tl.load(x_ptr + offs, mask=mask),
                 mask=mask)

    device = sys.argv[1]
    if device == "interpreter":
        tessera.config.knobs.interpret = True
        device = "cpu"
    x = torch.zeros(8, device=device)
    out = torch.zeros(3, 4, device=device)
    gather_rows[(3,)](x, out, int(sys.argv[2]), 8, BLOCK=4)
    if device == "cuda":
        torch.cuda.synchronize()
    print("finished")
""")


@pytest.mark.parametrize("where", ["gpu", "interpreter"])
def test_an_offset_that_overflows_int32_stops_the_kernel_in_debug_mode(tmp_path, where):
    """As Triton's sanitize_overflow under debug: the int32 multiply that computes an offset
    and wraps fails a device assertion naming the op (the interpreter raises at the same
    line); with an offset that fits the kernel runs."""
    script = tmp_path / "overflow_program.py"
    script.write_text(OVERFLOW_PROGRAM)
    env = dict(child_env(), TESSERA_DEBUG="0", TESSERA_CACHE_DIR=str(tmp_path / "cache"))
    device = "cuda" if where == "gpu" else "interpreter"
    run_with = [sys.executable, str(script), device]
    bad = subprocess.run(run_with + [str(2 ** 30)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert bad.returncode != 0 and "finished" not in bad.stdout
    assert "int32 overflow in" in bad.stdout + bad.stderr
    assert "overflow_program.py" in bad.stdout + bad.stderr  # the kernel's file and line
    good = subprocess.run(run_with + ["2"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert good.returncode == 0 and "finished" in good.stdout, good.stderr
