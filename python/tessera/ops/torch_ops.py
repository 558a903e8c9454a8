"""What the differentiable PyTorch custom ops of RMSNorm, LayerNorm (norms/) and matmul
(gemm.py) share; each family defines its own ops beside its launches, as attention does
(flash_attention/torch_op.py). The ops serve training (DDP, FSDP2, torch.compile): opaque
graph nodes with a fake implementation (output shapes and dtypes, all that tracing needs) and
an autograd formula.

- ``tessera::rms_norm(x, w, eps) -> y``, backward ``tessera::rms_norm_backward(dy, x, w,
  eps) -> (dx, dw)`` (the fused backward kernels of norms/)
- ``tessera::layer_norm(x, w, b, eps) -> y``, backward ``tessera::layer_norm_backward(dy, x,
  w, eps) -> (dx, dw, db)``
- ``tessera::matmul(a, b, bias?, activation) -> c``; its backward is two more matmuls
  (``da = dz @ bᵀ``, ``db = aᵀ @ dz``, the transposes as strides, no copies) and a column sum
  for the bias, where ``dz`` is ``dc`` through the activation: leaky_relu keeps the sign, so
  its slope is read from the output and no pre-activation is saved.

``tessera.ops.rms_norm``/``layer_norm``/``matmul`` route torch tensors through their op when
autograd needs them (grad enabled and an input requires grad) or torch.compile is tracing
(:func:`wants_op`); otherwise they launch directly (no dispatcher cost). CPU tensors run the
kernels through the interpreter (:func:`run`). A family's ops are registered on its first
call that needs them (:func:`library`).
"""
# No `from __future__ import annotations`: torch.library reads the annotations as types.

import sys
from typing import Any, Callable, Set

import tessera

_registered: Set[Callable[[], None]] = set()


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


def run(fn, *args):
    """fn(*args) on the GPU for CUDA tensors, else through the interpreter."""
    if args[0].is_cuda:
        return fn(*args)
    with tessera.config.knobs.scope(interpret=True):
        return fn(*args)


def library(register: Callable[[], None]) -> Any:
    """``torch.ops.tessera``, with the ops that ``register`` defines registered (once per
    process: a family registers its ops on its first call that needs them)."""
    import torch
    if register not in _registered:
        register()
        _registered.add(register)
    return torch.ops.tessera
