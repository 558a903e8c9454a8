"""JAX CPU arrays as kernel arguments in the interpreter: jax.Array offers
__cuda_array_interface__ on its class but raises for CPU buffers, which the specialization
must not take for a CUDA array; loads read them, stores into them (JAX arrays are immutable)
and unsupported inputs are errors that name the argument.

The checks run in a child process: JAX starts threads, and other tests in this session fork
(the autotuner's compile workers), which JAX warns may deadlock."""
import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest
from tessera.testing.environment import child_env

if importlib.util.find_spec("jax") is None:
    pytest.skip("jax is not installed (pip install jax jaxlib)", allow_module_level=True)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))

CHECKS = textwrap.dedent("""
    import sys
    import numpy as np
    import jax.numpy as jnp
    import pytest

    import tessera
    import tessera.language as tl
    from tessera.interpreter.errors import KernelRuntimeError
    from tessera.specialization import argument_key

    @tessera.jit(interpret=True)
    def axpy(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, alpha * x + tl.load(y_ptr + offs, mask=mask), mask=mask)

    check = sys.argv[1]
    if check == "specialize":
        x = jnp.arange(10, dtype=jnp.float32)
        kind, dtype, aligned = argument_key(x)
        assert kind == "tensor" and str(dtype) == "float32", (kind, dtype)
        assert aligned == (x.unsafe_buffer_pointer() % 16 == 0)
    elif check == "read":
        rng = np.random.default_rng()
        n = int(rng.integers(100, 1000))
        x_np = rng.standard_normal(n).astype(np.float32)
        y_np = rng.standard_normal(n).astype(np.float32)
        out = np.zeros(n, np.float32)
        axpy[(tessera.cdiv(n, 128),)](jnp.asarray(x_np), jnp.asarray(y_np), out, n, 1.5,
                                      BLOCK=128)
        np.testing.assert_allclose(out, np.float32(1.5) * x_np + y_np, rtol=1e-6, atol=1e-6)
    elif check == "store":
        x = jnp.ones(64, dtype=jnp.float32)
        with pytest.raises(KernelRuntimeError,
                           match=r"store into argument 'out_ptr' .*read-only"):
            axpy[(1,)](x, x, jnp.zeros(64, dtype=jnp.float32), 64, 1.0, BLOCK=64)
    elif check == "unsupported":
        x = jnp.ones(8, dtype=jnp.complex64)
        with pytest.raises(TypeError,
                           match=r"axpy: argument 'x_ptr': unsupported tensor dtype"):
            axpy[(1,)](x, np.ones(8, np.float32), np.zeros(8, np.float32), 8, 1.0, BLOCK=8)
        with pytest.raises(TypeError, match=r"axpy: argument 'y_ptr': unsupported argument "
                                            r"of type list"):
            axpy[(1,)](np.ones(8, np.float32), [1.0] * 8, np.zeros(8, np.float32), 8, 1.0,
                       BLOCK=8)
    print("passed", check)
""")


@pytest.mark.parametrize("check", ["specialize", "read", "store", "unsupported"])
def test_jax_cpu_arrays(tmp_path, check):
    script = tmp_path / "jax_checks.py"
    script.write_text(CHECKS)
    env = child_env(JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, str(script), check], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0 and f"passed {check}" in done.stdout, done.stdout + done.stderr
