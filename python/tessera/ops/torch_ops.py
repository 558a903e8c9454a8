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

``tessera.ops.rms_norm``/``layer_norm``/``matmul``/``attention``/``attention_masked`` route
torch tensors through their op while torch.compile is tracing, through the op's eager twin (a
``torch.autograd.Function`` made of the same parts: :func:`register_autograd`) when autograd
needs them (grad enabled and an input requires grad), and otherwise launch directly
(:func:`call`). The twin is there for host time: a custom op called eagerly with autograd
cost ~50 us more per call than the Function on the GPU machine's CPU, and a 0.2 ms masked
forward was host-bound by it (docs/perf/masked_attention.md, "Short walks"). CPU tensors
run the kernels through the interpreter (:func:`run`). A family's ops are registered on its
first call that needs them (:func:`library`).
"""
# No `from __future__ import annotations`: torch.library reads the annotations as types.

import sys
from typing import Any, Callable, Dict, Set

import tessera

_registered: Set[Callable[[], None]] = set()
_twins: Dict[str, Any] = {}  # op name ("rms_norm") -> its eager torch.autograd.Function


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


def register_autograd(op, name: str, body: Callable, backward: Callable,
                      setup_context: Callable) -> None:
    """``op.register_autograd(backward, setup_context=setup_context)``, and the op's eager twin
    made of the same parts: a torch.autograd.Function whose forward is ``body`` (the function
    the op was made of), kept under ``name`` for :func:`call`. Its backward is
    once-differentiable: the kernels are opaque to autograd, so a double backward raises
    instead of returning gradients that miss their second-order terms."""
    import torch
    from torch.autograd.function import once_differentiable
    op.register_autograd(backward, setup_context=setup_context)

    def forward(ctx, *inputs):
        # The forward(ctx, ...) form: with a separate setup_context, Function.apply binds the
        # arguments to forward's signature by inspect at every call (~100 us on a slow CPU).
        output = body(*inputs)
        setup_context(ctx, inputs, output)
        return output
    _twins[name] = type(f"{name}_function", (torch.autograd.Function,), {
        "forward": staticmethod(forward), "backward": staticmethod(once_differentiable(backward))})


def call(register: Callable[[], None], name: str, *args):
    """``torch.ops.tessera.<name>(*args)`` while torch.compile traces (the graph holds the op),
    else the op's eager twin (the same forward and formula, without the dispatcher's
    custom-op path; the op under torch.func's transforms too); for calls that :func:`wants_op`."""
    import torch
    ops = library(register)
    twin = _twins.get(name)  # none if an earlier import of the family registered the op
    # The twin's forward(ctx, ...) form is not one torch.func's transforms take: the op there.
    if (twin is None or torch.compiler.is_compiling()
            or torch._C._are_functorch_transforms_active()):
        return getattr(ops, name)(*args)
    return twin.apply(*args)
