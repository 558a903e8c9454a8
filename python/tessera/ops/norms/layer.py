"""LayerNorm: the launches, and the ``tessera::layer_norm`` custom ops (torch_ops.py says what
the families' ops share)."""
import tessera

from .. import torch_ops
from .kernels import layer_norm_bwd, layer_norm_fwd
from .tiles import backward_config, backward_programs, empty, reduce_partials, rows_and_cols, \
    tile_config


def layer_norm(x, w, b, eps: float = 1e-5, out=None):
    """LayerNorm forward: ``y = (x − mean) · rstd · w + b``, ``rstd = 1 / sqrt(var + eps)``
    per row (the biased variance, as torch.nn.functional.layer_norm).

    Args:
        x: (..., H) float32, float16 or bfloat16, contiguous; a CUDA torch tensor runs on the
            GPU, a NumPy array (or a CPU tensor with ``TESSERA_INTERPRET=1``) through the
            interpreter. Computed in float32.
        w, b: (H,) weight and bias. eps: added to the variance.
        out: written when given (like x).

    Returns:
        ``y``: like x (shape and dtype). Differentiable in x, w and b for torch tensors
        (through the ``tessera::layer_norm`` custom op, also under torch.compile).

    Example::

        import torch
        from tessera.ops import layer_norm
        x = torch.randn(8, 77, 512, device="cuda")
        w, b = torch.ones(512, device="cuda"), torch.zeros(512, device="cuda")
        y = layer_norm(x, w, b, 1e-5)  # F.layer_norm(x, (512,), w, b, 1e-5)
    """
    if out is None and torch_ops.wants_op(x, w, b):  # autograd or torch.compile: the op
        return torch_ops.call(_register_ops, "layer_norm", x, w, b, eps)
    return layer_norm_forward(x, w, b, eps, out)


def layer_norm_forward(x, w, b, eps: float = 1e-5, out=None):
    """:func:`layer_norm`'s launch, never through the custom op (what the op runs)."""
    n_rows, n_cols = rows_and_cols(x)
    out = empty(x, x.shape) if out is None else out
    config = tile_config(n_cols)
    grid = (tessera.cdiv(n_rows, config["BLOCK_ROWS"]),)
    layer_norm_fwd[grid](x, w, b, out, n_rows, n_cols, eps, **config)
    return out


def layer_norm_backward(dy, x, w, eps: float = 1e-5, dx=None):
    """LayerNorm backward: ``(dx, dw, db)`` of ``layer_norm(x, w, b, eps)`` for dy.

    With x̂ = (x − mean) · rstd and g = dy · w: ``dx = rstd · (g − x̂ · mean(g · x̂) −
    mean(g))`` per row, ``dw = Σ_rows dy · x̂``, ``db = Σ_rows dy``, summed in float32 (partial
    rows per program, added by one more launch; no atomics). The bias is not needed.

    Args:
        dy, x: (..., H) contiguous, one dtype (float32, float16 or bfloat16); w: (H,).
        dx: written when given (like x).

    Returns:
        ``(dx, dw, db)``: dx like x, dw and db (H,) in w's dtype.

    Example::

        from tessera.ops import layer_norm_backward
        dx, dw, db = layer_norm_backward(torch.randn_like(x), x, w, 1e-5)
    """
    n_rows, n_cols = rows_and_cols(x)
    dx = empty(x, x.shape) if dx is None else dx
    config = backward_config(n_cols, reductions_per_row=4)
    programs = backward_programs(layer_norm_bwd,
                                 (dy, x, w, dx, None, None, n_rows, n_cols, eps), config,
                                 n_rows, n_cols)
    partials = empty(x, (2, programs, n_cols), fp32=True)  # dw's and db's, summed together
    layer_norm_bwd[(programs,)](dy, x, w, dx, partials[0], partials[1], n_rows, n_cols, eps,
                                **config)
    dw, db = reduce_partials(partials, w)
    return dx, dw, db


def _register_ops():
    """Defines ``tessera::layer_norm`` and ``tessera::layer_norm_backward``."""
    import torch
    from torch import Tensor

    def layer_norm_body(x: Tensor, w: Tensor, b: Tensor, eps: float) -> Tensor:
        return torch_ops.run(layer_norm_forward, x.contiguous(), w.contiguous(),
                             b.contiguous(), eps)

    layer_norm_op = torch.library.custom_op("tessera::layer_norm",
                                            mutates_args=())(layer_norm_body)

    @layer_norm_op.register_fake
    def _(x, w, b, eps):
        return torch.empty_like(x, memory_format=torch.contiguous_format)

    @torch.library.custom_op("tessera::layer_norm_backward", mutates_args=())
    def layer_norm_backward_op(dy: Tensor, x: Tensor, w: Tensor,
                               eps: float) -> tuple[Tensor, Tensor, Tensor]:
        dx, dw, db = torch_ops.run(layer_norm_backward, dy.contiguous(), x.contiguous(),
                                   w.contiguous(), eps)
        return dx, dw, db.clone()  # dw and db are rows of one tensor; an op's outputs may not alias

    @layer_norm_backward_op.register_fake
    def _(dy, x, w, eps):
        return (torch.empty_like(x, memory_format=torch.contiguous_format),
                torch.empty_like(w), torch.empty_like(w))

    def layer_setup(ctx, inputs, output):
        x, w, b, eps = inputs
        ctx.save_for_backward(x, w)
        ctx.eps = eps

    def layer_backward(ctx, dy):
        x, w = ctx.saved_tensors
        dx, dw, db = layer_norm_backward_op(dy, x, w, ctx.eps)
        return dx, dw, db, None

    torch_ops.register_autograd(layer_norm_op, "layer_norm", layer_norm_body, layer_backward,
                                layer_setup)
