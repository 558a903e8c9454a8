"""Masked attention as PyTorch custom ops, differentiable and traceable by torch.compile, as
the dense attention's (flash_attention/torch_op.py): opaque graph nodes with fake
implementations and an autograd formula that calls the backward op. Names (stable):

- ``tessera::attention_masked_forward(q, k, v, mask?, bias?, causal, sm_scale) -> (o, lse2)``
- ``tessera::attention_masked_backward(q, k, v, o, lse2, do, mask?, bias?, causal, sm_scale,
  bias_grad) -> (dq, dk, dv, dbias)`` (dbias: an empty tensor unless bias_grad)

CPU tensors run the kernels through the interpreter.
"""

from .. import torch_ops
from ..flash_attention.configs import _last_dim_contiguous
from .backward import attention_masked_backward
from .forward import attention_masked_forward

try:
    import torch
except ImportError:
    torch = None


def _forward_body(q, k, v, mask, bias, causal: bool, sm_scale: float):
    """What the forward op runs (and `attention_masked` without autograd)."""
    q, k, v = (_last_dim_contiguous(x) for x in (q, k, v))
    return torch_ops.run(attention_masked_forward, q, k, v, mask, bias, causal, sm_scale)


def _register_torch_ops() -> None:
    if hasattr(torch.ops.tessera, "attention_masked_forward"):  # registered once per process
        return
    Tensor, Optional = torch.Tensor, __import__("typing").Optional

    def forward_body(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor],
                     bias: Optional[Tensor], causal: bool,
                     sm_scale: float) -> tuple[Tensor, Tensor]:
        return _forward_body(q, k, v, mask, bias, causal, sm_scale)

    forward_op = torch.library.custom_op("tessera::attention_masked_forward",
                                         mutates_args=())(forward_body)

    @forward_op.register_fake
    def _(q, k, v, mask, bias, causal, sm_scale):
        return q.new_empty(q.shape), q.new_empty(q.shape[:3], dtype=torch.float32)

    @torch.library.custom_op("tessera::attention_masked_backward", mutates_args=())
    def backward_op(q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, do: Tensor,
                    mask: Optional[Tensor], bias: Optional[Tensor], causal: bool,
                    sm_scale: float, bias_grad: bool) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        q, k, v, o, do = (_last_dim_contiguous(x) for x in (q, k, v, o, do))
        dq, dk, dv, dbias = torch_ops.run(attention_masked_backward, q, k, v, o, lse, do, mask,
                                          bias, causal, sm_scale, bias_grad)
        return dq, dk, dv, q.new_empty((0,)) if dbias is None else dbias

    @backward_op.register_fake
    def _(q, k, v, o, lse, do, mask, bias, causal, sm_scale, bias_grad):
        dbias = bias.new_empty(bias.shape) if bias_grad and bias is not None \
            else q.new_empty((0,))
        return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape), dbias

    def setup_context(ctx, inputs, output):
        q, k, v, mask, bias, causal, sm_scale = inputs
        o, lse = output
        ctx.save_for_backward(q, k, v, o, lse, mask, bias)
        ctx.causal, ctx.sm_scale = causal, sm_scale
        ctx.mark_non_differentiable(lse)

    def backward(ctx, do, dlse):
        q, k, v, o, lse, mask, bias = ctx.saved_tensors
        bias_grad = bias is not None and ctx.needs_input_grad[4]
        dq, dk, dv, dbias = backward_op(q, k, v, o, lse, do, mask, bias, ctx.causal,
                                        ctx.sm_scale, bias_grad)
        return dq, dk, dv, None, dbias if bias_grad else None, None, None

    torch_ops.register_autograd(forward_op, "attention_masked_forward", forward_body,
                                backward, setup_context)


def attention_masked(q, k, v, mask=None, bias=None, causal: bool = False,
                     scale: float | None = None):
    """Attention with a run-time mask and an additive bias, differentiable in q, k, v and bias:
    ``softmax(q kᵀ · scale + bias, where mask) v``.

    Args:
        q: (B, Hq, Sq, D) torch tensor; k, v: (B, Hkv, Sk, D), Hkv dividing Hq (grouped-query
            heads); one dtype (float16, bfloat16, or float32 in tf32), D in (16, 32, 64, 128,
            256). CUDA tensors run on the GPU, CPU tensors through the interpreter.
        mask: bool (B|1, Hq|1, Sq|1, Sk); True = visible. Size-1 dims broadcast (0 strides,
            never copied). 128 x 128 blocks with no visible pair are skipped, forward and
            backward. A row that sees no key gives 0 and zero gradients.
        bias: float16/bfloat16/float32 (B|1, Hq|1, Sq|1, Sk) added to the scaled scores (e.g.
            ALiBi, a learned position bias); its gradient is summed over its broadcast dims
            and computed only when it requires grad.
        causal: also hide keys j > i (top-left aligned, as SDPA's ``is_causal``).
        scale: the score scale, default ``D ** -0.5``.

    Returns:
        ``o``, (B, Hq, Sq, D) in q's dtype; ``torch.compile(fullgraph=True)`` traces it (and
        its backward) without a graph break.

    Example::

        import torch
        from tessera.ops import attention_masked
        q, k, v = (torch.randn(1, 8, 4096, 64, device="cuda", dtype=torch.bfloat16,
                               requires_grad=True) for _ in range(3))
        i = torch.arange(4096, device="cuda")
        window = ((i[:, None] - i[None, :]).abs() < 256)[None, None]   # sliding window
        alibi = -(i[:, None] - i[None, :]).abs().to(torch.bfloat16)[None, None] / 64
        o = attention_masked(q, k, v, mask=window, bias=alibi.requires_grad_())
        o.sum().backward()   # q.grad, k.grad, v.grad, alibi.grad
    """
    if torch is None:
        raise ImportError("tessera.ops.attention_masked needs PyTorch (pip install torch); "
                          "attention_masked_forward and _backward also take NumPy arrays")
    if not all(isinstance(x, torch.Tensor) for x in (q, k, v)):
        raise TypeError(f"tessera.ops.attention_masked takes torch tensors, got "
                        f"{type(q).__name__}; attention_masked_forward and _backward take "
                        f"NumPy arrays")
    if scale is None:
        scale = q.shape[-1] ** -0.5
    if torch_ops.wants_op(q, k, v, bias):
        return torch_ops.call(_register_torch_ops, "attention_masked_forward", q, k, v, mask,
                              bias, causal, scale)[0]
    return _forward_body(q, k, v, mask, bias, causal, scale)[0]


if torch is not None:
    torch_ops.library(_register_torch_ops)  # at import: benchmarks call the ops by name
