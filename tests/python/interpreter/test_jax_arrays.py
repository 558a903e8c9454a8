"""JAX CPU arrays as kernel arguments in the interpreter: jax.Array offers
__cuda_array_interface__ on its class but raises for CPU buffers, which the specialization
must not take for a CUDA array; loads read them, stores into them (JAX arrays are immutable)
and unsupported inputs are errors that name the argument."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

import tessera  # noqa: E402
import tessera.language as tl  # noqa: E402
from tessera.interpreter.errors import KernelRuntimeError  # noqa: E402
from tessera.specialization import argument_key  # noqa: E402


@tessera.jit(interpret=True)
def axpy(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, alpha * x + tl.load(y_ptr + offs, mask=mask), mask=mask)


def test_jax_cpu_arrays_specialize_by_their_host_address():
    x = jnp.arange(10, dtype=jnp.float32)
    kind, dtype, aligned = argument_key(x)
    assert kind == "tensor" and str(dtype) == "float32"
    assert aligned == (x.unsafe_buffer_pointer() % 16 == 0)


def test_jax_cpu_arrays_are_read_by_the_interpreter():
    rng = np.random.default_rng()
    n = int(rng.integers(100, 1000))
    x_np = rng.standard_normal(n).astype(np.float32)
    y_np = rng.standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    axpy[(tessera.cdiv(n, 128),)](jnp.asarray(x_np), jnp.asarray(y_np), out, n, 1.5, BLOCK=128)
    expected = (np.float32(1.5) * x_np + y_np)
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)


def test_storing_into_a_jax_array_names_the_argument():
    x = jnp.ones(64, dtype=jnp.float32)
    with pytest.raises(KernelRuntimeError, match=r"store into argument 'out_ptr' .*read-only"):
        axpy[(1,)](x, x, jnp.zeros(64, dtype=jnp.float32), 64, 1.0, BLOCK=64)


def test_unsupported_inputs_name_the_argument():
    x = jnp.ones(8, dtype=jnp.complex64)
    with pytest.raises(TypeError, match=r"axpy: argument 'x_ptr': unsupported tensor dtype"):
        axpy[(1,)](x, np.ones(8, np.float32), np.zeros(8, np.float32), 8, 1.0, BLOCK=8)
    with pytest.raises(TypeError, match=r"axpy: argument 'y_ptr': unsupported argument of "
                                        r"type list"):
        axpy[(1,)](np.ones(8, np.float32), [1.0] * 8, np.zeros(8, np.float32), 8, 1.0, BLOCK=8)
