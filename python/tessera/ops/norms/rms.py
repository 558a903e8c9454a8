"""RMSNorm: the launches, and the ``tessera::rms_norm`` custom ops (torch_ops.py says what
the families' ops share)."""
import tessera

from .. import torch_ops
from .kernels import rms_norm_bwd, rms_norm_fwd
from .tiles import backward_config, backward_programs, empty, reduce_partials, rows_and_cols, \
    tile_config


def rms_norm(x, w, eps: float = 1e-6, out=None):
    """RMSNorm forward: ``y = x · rstd · w`` with ``rstd = 1 / sqrt(mean(x²) + eps)`` per row.

    Args:
        x: (..., H) float32, float16 or bfloat16, contiguous (rows of H elements); a CUDA
            torch tensor runs on the GPU, a NumPy array (or a CPU tensor with
            ``TESSERA_INTERPRET=1``) through the interpreter. Computed in float32.
        w: (H,) weight. eps: added to the mean square.
        out: written when given (like x).

    Returns:
        ``y``: like x (shape and dtype). Differentiable in x and w for torch tensors (through
        the ``tessera::rms_norm`` custom op, also under torch.compile: torch_ops.py).

    Example::

        import torch
        from tessera.ops import rms_norm
        x = torch.randn(8, 77, 512, device="cuda", dtype=torch.bfloat16)
        w = torch.ones(512, device="cuda", dtype=torch.bfloat16)
        y = rms_norm(x, w, 1e-6)  # torch.nn.functional.rms_norm(x, (512,), w, 1e-6)
    """
    if out is None and torch_ops.wants_op(x, w):  # autograd or torch.compile: the custom op
        return torch_ops.call(_register_ops, "rms_norm", x, w, eps)
    return rms_norm_forward(x, w, eps, out)


def rms_norm_forward(x, w, eps: float = 1e-6, out=None):
    """:func:`rms_norm`'s launch, never through the custom op (what the op runs)."""
    n_rows, n_cols = rows_and_cols(x)
    out = empty(x, x.shape) if out is None else out
    config = tile_config(n_cols)
    grid = (tessera.cdiv(n_rows, config["BLOCK_ROWS"]),)
    rms_norm_fwd[grid](x, w, out, n_rows, n_cols, eps, **config)
    return out


def rms_norm_backward(dy, x, w, eps: float = 1e-6, dx=None):
    """RMSNorm backward: ``(dx, dw)`` of ``rms_norm(x, w, eps)`` for the output gradient dy.

    With x̂ = x · rstd and g = dy · w: ``dx = rstd · (g − x̂ · mean(g · x̂))`` per row and
    ``dw = Σ_rows dy · x̂``, summed in float32 (one partial row per program, then a second
    kernel adds the partial rows; no atomics). rstd is recomputed from x.

    Args:
        dy, x: (..., H) contiguous, one dtype (float32, float16 or bfloat16); w: (H,).
        dx: written when given (like x).

    Returns:
        ``(dx, dw)``: dx like x, dw (H,) in w's dtype.

    Example::

        from tessera.ops import rms_norm_backward
        dx, dw = rms_norm_backward(torch.randn_like(x), x, w, 1e-6)
    """
    n_rows, n_cols = rows_and_cols(x)
    dx = empty(x, x.shape) if dx is None else dx
    config = backward_config(n_cols, reductions_per_row=2)
    programs = backward_programs(rms_norm_bwd, (dy, x, w, dx, None, n_rows, n_cols, eps),
                                 config, n_rows, n_cols)
    partials = empty(x, (programs, n_cols), fp32=True)
    rms_norm_bwd[(programs,)](dy, x, w, dx, partials, n_rows, n_cols, eps, **config)
    return dx, reduce_partials(partials, w)


def _register_ops():
    """Defines ``tessera::rms_norm`` and ``tessera::rms_norm_backward``."""
    import torch
    from torch import Tensor

    def rms_norm_body(x: Tensor, w: Tensor, eps: float) -> Tensor:
        return torch_ops.run(rms_norm_forward, x.contiguous(), w.contiguous(), eps)

    rms_norm_op = torch.library.custom_op("tessera::rms_norm", mutates_args=())(rms_norm_body)

    @rms_norm_op.register_fake
    def _(x, w, eps):
        return torch.empty_like(x, memory_format=torch.contiguous_format)

    @torch.library.custom_op("tessera::rms_norm_backward", mutates_args=())
    def rms_norm_backward_op(dy: Tensor, x: Tensor, w: Tensor,
                             eps: float) -> tuple[Tensor, Tensor]:
        return torch_ops.run(rms_norm_backward, dy.contiguous(), x.contiguous(),
                             w.contiguous(), eps)

    @rms_norm_backward_op.register_fake
    def _(dy, x, w, eps):
        return torch.empty_like(x, memory_format=torch.contiguous_format), torch.empty_like(w)

    def rms_setup(ctx, inputs, output):
        x, w, eps = inputs
        ctx.save_for_backward(x, w)
        ctx.eps = eps

    def rms_backward(ctx, dy):
        x, w = ctx.saved_tensors
        dx, dw = rms_norm_backward_op(dy, x, w, ctx.eps)
        return dx, dw, None

    torch_ops.register_autograd(rms_norm_op, "rms_norm", rms_norm_body, rms_backward,
                                rms_setup)
