"""RMSNorm, LayerNorm and matmul as differentiable PyTorch custom ops (training, DDP, FSDP2,
torch.compile), as attention's (flash_attention/torch_op.py): opaque graph nodes with a fake
implementation (output shapes and dtypes, all that tracing needs) and an autograd formula.

- ``tessera::rms_norm(x, w, eps) -> y``, backward ``tessera::rms_norm_backward(dy, x, w,
  eps) -> (dx, dw)`` (the fused backward kernels of norms.py)
- ``tessera::layer_norm(x, w, b, eps) -> y``, backward ``tessera::layer_norm_backward(dy, x,
  w, eps) -> (dx, dw, db)``
- ``tessera::matmul(a, b, bias?, activation) -> c``; its backward is two more matmuls
  (``da = dz @ bᵀ``, ``db = aᵀ @ dz``, the transposes as strides, no copies) and a column sum
  for the bias, where ``dz`` is ``dc`` through the activation: leaky_relu keeps the sign, so
  its slope is read from the output and no pre-activation is saved.

``tessera.ops.rms_norm``/``layer_norm``/``matmul`` route torch tensors here when autograd
needs them (grad enabled and an input requires grad) or torch.compile is tracing; otherwise
they launch directly (no dispatcher cost). CPU tensors run the kernels through the
interpreter. The ops are registered on first use.
"""
# No `from __future__ import annotations`: torch.library reads the annotations as types.

import sys

import tessera

_registered = False


def wants_op(*tensors) -> bool:
    """Whether a call on these arguments must go through the custom op: torch tensors that
    autograd tracks, or a torch.compile trace (fake tensors cannot be launched)."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(tensors[0], torch.Tensor):
        return False
    if torch.compiler.is_compiling():
        return True
    return torch.is_grad_enabled() and any(
        isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)


def _run(fn, *args):
    """fn(*args) on the GPU for CUDA tensors, else through the interpreter."""
    if args[0].is_cuda:
        return fn(*args)
    with tessera.config.knobs.scope(interpret=True):
        return fn(*args)


def ops():
    """``torch.ops.tessera``, with this module's ops registered (once per process)."""
    import torch
    global _registered
    if not _registered:
        _register_norms()
        _register_matmul()
        _registered = True
    return torch.ops.tessera


def _register_norms():
    import torch
    from torch import Tensor

    from . import norms

    @torch.library.custom_op("tessera::rms_norm", mutates_args=())
    def rms_norm(x: Tensor, w: Tensor, eps: float) -> Tensor:
        return _run(norms.rms_norm_forward, x.contiguous(), w.contiguous(), eps)

    @rms_norm.register_fake
    def _(x, w, eps):
        return torch.empty_like(x, memory_format=torch.contiguous_format)

    @torch.library.custom_op("tessera::rms_norm_backward", mutates_args=())
    def rms_norm_backward(dy: Tensor, x: Tensor, w: Tensor, eps: float) -> tuple[Tensor, Tensor]:
        return _run(norms.rms_norm_backward, dy.contiguous(), x.contiguous(), w.contiguous(),
                    eps)

    @rms_norm_backward.register_fake
    def _(dy, x, w, eps):
        return torch.empty_like(x, memory_format=torch.contiguous_format), torch.empty_like(w)

    def rms_setup(ctx, inputs, output):
        x, w, eps = inputs
        ctx.save_for_backward(x, w)
        ctx.eps = eps

    def rms_backward(ctx, dy):
        x, w = ctx.saved_tensors
        dx, dw = rms_norm_backward(dy, x, w, ctx.eps)
        return dx, dw, None

    rms_norm.register_autograd(rms_backward, setup_context=rms_setup)

    @torch.library.custom_op("tessera::layer_norm", mutates_args=())
    def layer_norm(x: Tensor, w: Tensor, b: Tensor, eps: float) -> Tensor:
        return _run(norms.layer_norm_forward, x.contiguous(), w.contiguous(), b.contiguous(),
                    eps)

    @layer_norm.register_fake
    def _(x, w, b, eps):
        return torch.empty_like(x, memory_format=torch.contiguous_format)

    @torch.library.custom_op("tessera::layer_norm_backward", mutates_args=())
    def layer_norm_backward(dy: Tensor, x: Tensor, w: Tensor,
                            eps: float) -> tuple[Tensor, Tensor, Tensor]:
        dx, dw, db = _run(norms.layer_norm_backward, dy.contiguous(), x.contiguous(),
                          w.contiguous(), eps)
        return dx, dw, db.clone()  # dw and db are rows of one tensor; an op's outputs may not alias

    @layer_norm_backward.register_fake
    def _(dy, x, w, eps):
        return (torch.empty_like(x, memory_format=torch.contiguous_format),
                torch.empty_like(w), torch.empty_like(w))

    def layer_setup(ctx, inputs, output):
        x, w, b, eps = inputs
        ctx.save_for_backward(x, w)
        ctx.eps = eps

    def layer_backward(ctx, dy):
        x, w = ctx.saved_tensors
        dx, dw, db = layer_norm_backward(dy, x, w, ctx.eps)
        return dx, dw, db, None

    layer_norm.register_autograd(layer_backward, setup_context=layer_setup)


def _register_matmul():
    import torch
    from torch import Tensor

    from . import gemm

    @torch.library.custom_op("tessera::matmul", mutates_args=())
    def matmul(a: Tensor, b: Tensor, bias: Tensor | None, activation: str) -> Tensor:
        return _run(gemm.matmul_forward, a, b, bias, activation)

    @matmul.register_fake
    def _(a, b, bias, activation):
        return a.new_empty((a.shape[0], b.shape[1]))

    def setup(ctx, inputs, output):
        a, b, bias, activation = inputs
        ctx.save_for_backward(a, b, output if activation else None)
        ctx.activation = activation
        ctx.bias_dtype = None if bias is None else bias.dtype

    def backward(ctx, dc):
        a, b, c = ctx.saved_tensors
        dz = dc
        if ctx.activation == "leaky_relu":  # the output has the pre-activation's sign
            dz = torch.where(c >= 0, dc, dc * gemm.LEAKY_SLOPE)
        elif ctx.activation:
            raise NotImplementedError(f"tessera::matmul: no gradient for activation "
                                      f"{ctx.activation!r}")
        dz = dz.to(a.dtype)
        da = matmul(dz, b.t(), None, "") if ctx.needs_input_grad[0] else None
        db = matmul(a.t(), dz, None, "") if ctx.needs_input_grad[1] else None
        dbias = None
        if ctx.bias_dtype is not None and ctx.needs_input_grad[2]:
            dbias = dz.float().sum(0).to(ctx.bias_dtype)
        return da, db, dbias, None

    matmul.register_autograd(backward, setup_context=setup)
