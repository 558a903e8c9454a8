"""Fused attention as PyTorch custom ops, differentiable and traceable by torch.compile.

`torch.compile` cannot look inside a Tessera launch, so the kernels become `torch.library`
custom ops: opaque nodes in the traced graph, each with a *fake* implementation (the shapes
and dtypes of its outputs, all that tracing needs), and an autograd formula that calls the
backward op. The ops (names stable: benchmarks and tests call them):

- ``tessera::attention_forward(q, k, v, causal, sm_scale) -> (o, lse2)``
- ``tessera::attention_backward(q, k, v, o, lse2, do, causal, sm_scale) -> (dq, dk, dv)``

On CPU tensors the ops run the same kernels through the interpreter (it takes CPU tensors as
they are), so the whole flow can be checked without a GPU. Without torch this module defines
`attention` only, which then raises.
"""

from .. import torch_ops
from .backward import attention_backward
from .configs import _last_dim_contiguous
from .forward import attention_forward

try:
    import torch
except ImportError:
    torch = None


def _forward_body(q, k, v, causal: bool, sm_scale: float):
    """What the forward op runs (and `attention` without autograd)."""
    q, k, v = (_last_dim_contiguous(x) for x in (q, k, v))
    return torch_ops.run(attention_forward, q, k, v, causal, sm_scale)


def _register_torch_ops() -> None:
    if hasattr(torch.ops.tessera, "attention_forward"):  # registered once per process
        return
    Tensor = torch.Tensor

    def forward_body(q: Tensor, k: Tensor, v: Tensor, causal: bool,
                     sm_scale: float) -> tuple[Tensor, Tensor]:
        return _forward_body(q, k, v, causal, sm_scale)

    forward_op = torch.library.custom_op("tessera::attention_forward",
                                         mutates_args=())(forward_body)

    @forward_op.register_fake
    def _(q, k, v, causal, sm_scale):
        return q.new_empty(q.shape), q.new_empty(q.shape[:3], dtype=torch.float32)

    @torch.library.custom_op("tessera::attention_backward", mutates_args=())
    def backward_op(q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, do: Tensor,
                    causal: bool, sm_scale: float) -> tuple[Tensor, Tensor, Tensor]:
        q, k, v, o, do = (_last_dim_contiguous(x) for x in (q, k, v, o, do))
        return torch_ops.run(attention_backward, q, k, v, o, lse, do, causal, sm_scale)

    @backward_op.register_fake
    def _(q, k, v, o, lse, do, causal, sm_scale):
        return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)

    def setup_context(ctx, inputs, output):
        q, k, v, causal, sm_scale = inputs
        o, lse = output
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.sm_scale = causal, sm_scale
        ctx.mark_non_differentiable(lse)

    def backward(ctx, do, dlse):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = backward_op(q, k, v, o, lse, do, ctx.causal, ctx.sm_scale)
        return dq, dk, dv, None, None

    torch_ops.register_autograd(forward_op, "attention_forward", forward_body, backward,
                                setup_context)


def attention(q, k, v, causal: bool = False, sm_scale: float | None = None):
    """Fused attention ``softmax(q kᵀ · sm_scale) v`` for PyTorch, differentiable in q, k, v.

    Args:
        q, k, v: (B, H, S, D) torch tensors of one dtype (float16, bfloat16 or float32 in
            tf32), D in (16, 32, 64, 128, 256); CUDA tensors run on the GPU, CPU tensors
            through the interpreter. Any strides (a last dim that is not contiguous is copied).
        causal: query i sees keys j <= i only.
        sm_scale: the score scale, default ``D ** -0.5``.

    Returns:
        ``o``, (B, H, S, D) in q's dtype. Backward runs the fused backward kernels;
        ``torch.compile(fullgraph=True)`` traces it without a graph break.

    Example::

        import torch
        from tessera.ops import attention
        q, k, v = (torch.randn(2, 8, 1024, 64, device="cuda", dtype=torch.bfloat16,
                               requires_grad=True) for _ in range(3))
        o = attention(q, k, v, causal=True)
        o.sum().backward()  # q.grad, k.grad, v.grad
        compiled = torch.compile(attention, fullgraph=True)  # no graph break

    Under torch.compile the graph holds the ``tessera::attention_forward`` op; eager calls
    that autograd tracks run its twin (ops/torch_ops.py), others launch directly.
    """
    if torch is None:
        raise ImportError("tessera.ops.attention needs PyTorch (pip install torch); "
                          "attention_forward and attention_backward also take NumPy arrays")
    if not all(isinstance(x, torch.Tensor) for x in (q, k, v)):
        raise TypeError(f"tessera.ops.attention takes torch tensors, got {type(q).__name__}; "
                        f"attention_forward and attention_backward take NumPy arrays")
    if sm_scale is None:
        sm_scale = q.shape[-1] ** -0.5
    if torch_ops.wants_op(q, k, v):
        return torch_ops.call(_register_torch_ops, "attention_forward", q, k, v, causal,
                              sm_scale)[0]
    return _forward_body(q, k, v, causal, sm_scale)[0]


if torch is not None:
    torch_ops.library(_register_torch_ops)  # at import: benchmarks call the ops by name
