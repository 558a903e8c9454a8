"""Tessera's kernel library: fused attention (forward, backward, and a differentiable
``torch.library`` op), RMSNorm and LayerNorm (forward and backward), softmax, and matmul with
a fused bias and activation. Each takes CUDA torch tensors (the GPU) or NumPy arrays (the
interpreter), picks or autotunes its tiles, and documents its shapes and dtypes::

    from tessera.ops import attention, attention_masked, layer_norm, matmul, rms_norm, softmax
    o = attention(q, k, v, causal=True)       # (B, H, S, D) torch tensors, differentiable
    o = attention_masked(q, k, v, mask=mask, bias=bias)  # run-time mask + learnable bias

Names load on first use (PEP 562), so ``import tessera`` does not import PyTorch; the
families are modules: ``flash_attention``, ``masked_attention``, ``norms``, ``fused_softmax``,
``gemm``.
"""
import importlib

# name -> the module (of this package) that defines it
_EXPORTS = {
    "attention": "flash_attention",
    "attention_forward": "flash_attention",
    "attention_backward": "flash_attention",
    "attention_masked": "masked_attention",
    "attention_masked_forward": "masked_attention",
    "attention_masked_backward": "masked_attention",
    "rms_norm": "norms",
    "rms_norm_backward": "norms",
    "layer_norm": "norms",
    "layer_norm_backward": "norms",
    "softmax": "fused_softmax",
    "matmul": "gemm",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'tessera.ops' has no attribute {name!r}; "
                             f"it has {', '.join(sorted(_EXPORTS))}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
