"""tessera.ops' rms_norm, layer_norm and matmul as differentiable torch custom ops
(ops/torch_ops.py), on CPU tensors (the interpreter runs the kernels): forward and gradients
against float64 torch references on fresh random inputs with odd shapes, eager and traced by
torch.compile (aot_eager: the fake implementations and the autograd formulas, no C++ compiler);
tensors that need no gradient keep the direct launch."""
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from tessera.ops import layer_norm, matmul, rms_norm, torch_ops  # noqa: E402


def relative(got, ref):
    ref = ref.double()
    return ((got.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def leaves(*tensors):
    return [t.detach().clone().requires_grad_(True) for t in tensors]


def grads_of(fn, inputs, dy):
    inputs = leaves(*inputs)
    out = fn(*inputs)
    out.backward(dy)
    return out.detach(), [t.grad for t in inputs]


def norm_inputs(seed, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(3, 5, 48, generator=gen).to(dtype)
    w, b = (1 + 0.5 * torch.randn(48, generator=gen)).to(dtype), torch.randn(48, generator=gen)
    return x, w, b.to(dtype), torch.randn(3, 5, 48, generator=gen).to(dtype)


@pytest.mark.parametrize("compiled", [False, True])
def test_rms_norm_gradients(compiled):
    x, w, _, dy = norm_inputs(1)
    fn = (lambda x, w: rms_norm(x, w, 1e-6))
    if compiled:
        fn = torch.compile(fn, backend="aot_eager", fullgraph=True)
    y, (dx, dw) = grads_of(fn, (x, w), dy)
    y_ref, (dx_ref, dw_ref) = grads_of(lambda x, w: F.rms_norm(x, (48,), w, 1e-6),
                                       (x.double(), w.double()), dy.double())
    for got, ref in ((y, y_ref), (dx, dx_ref), (dw, dw_ref)):
        assert relative(got, ref) < 1e-5


@pytest.mark.parametrize("compiled", [False, True])
def test_layer_norm_gradients(compiled):
    x, w, b, dy = norm_inputs(2)
    fn = (lambda x, w, b: layer_norm(x, w, b, 1e-5))
    if compiled:
        fn = torch.compile(fn, backend="aot_eager", fullgraph=True)
    y, grads = grads_of(fn, (x, w, b), dy)
    y_ref, refs = grads_of(lambda x, w, b: F.layer_norm(x, (48,), w, b, 1e-5),
                           (x.double(), w.double(), b.double()), dy.double())
    for got, ref in zip([y, *grads], [y_ref, *refs]):
        assert relative(got, ref) < 1e-5


@pytest.mark.parametrize("activation", ["", "leaky_relu"])
@pytest.mark.parametrize("compiled", [False, True])
def test_matmul_gradients(activation, compiled):
    gen = torch.Generator().manual_seed(3)
    a = torch.randn(37, 40, generator=gen).half()
    b = (torch.randn(40, 24, generator=gen) / 6).half()
    bias = torch.randn(24, generator=gen).half()
    dc = torch.randn(37, 24, generator=gen).half()
    fn = (lambda a, b, bias: matmul(a, b, bias, activation))
    if compiled:
        fn = torch.compile(fn, backend="aot_eager", fullgraph=True)
    c, grads = grads_of(fn, (a, b, bias), dc)

    def reference(a, b, bias):
        z = a @ b + bias
        return F.leaky_relu(z, 0.01) if activation else z
    c_ref, refs = grads_of(reference, (a.double(), b.double(), bias.double()), dc.double())
    for name, got, ref in zip(("c", "da", "db", "dbias"), [c, *grads], [c_ref, *refs]):
        assert relative(got, ref) < 5e-3, name


def test_tensors_without_gradients_launch_directly(monkeypatch):
    x, w, _, _ = norm_inputs(4)
    assert not torch_ops.wants_op(x, w)
    assert torch_ops.wants_op(x, w.requires_grad_(True))
    with torch.no_grad():
        assert not torch_ops.wants_op(x, w)
    assert not torch_ops.wants_op(x.numpy(), w)


def test_eager_calls_run_the_twin_and_compiled_graphs_hold_the_op():
    # Eager calls that autograd tracks skip the dispatcher's custom-op path (host time) through
    # a torch.autograd.Function of the same parts; a torch.compile graph holds the op itself.
    x, w, _, dy = norm_inputs(5)
    x, w = leaves(x, w)
    assert type(rms_norm(x, w).grad_fn).__name__.startswith("rms_norm_function")
    a, b = leaves(torch.randn(5, 8).half(), torch.randn(8, 3).half())
    assert type(matmul(a, b).grad_fn).__name__.startswith("matmul_function")
    targets = []

    def backend(gm, example_inputs):
        targets.extend(str(node.target) for node in gm.graph.nodes)
        return gm.forward
    torch.compile(lambda x, w: rms_norm(x, w), backend=backend, fullgraph=True)(x, w)
    assert "tessera.rms_norm" in targets


def test_a_double_backward_raises_instead_of_dropping_second_order_terms():
    x, w, _, dy = norm_inputs(6)
    x, w = leaves(x, w)
    dx, = torch.autograd.grad(rms_norm(x, w), x, dy, create_graph=True)
    with pytest.raises(RuntimeError):
        dx.sum().backward()


def test_the_attention_ops_name_what_they_take():
    import numpy as np
    from tessera.ops import attention, attention_masked
    x = np.zeros((1, 1, 16, 16), np.float16)
    with pytest.raises(TypeError, match="tessera.ops.attention takes torch tensors"):
        attention(x, x, x)
    with pytest.raises(TypeError, match="attention_masked takes torch tensors"):
        attention_masked(x, x, x)
