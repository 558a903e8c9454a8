"""Fused attention (FlashAttention-2), forward and backward, autotuned per (S, D, causal,
dtype); with PyTorch installed also the ``tessera::attention_forward`` /
``tessera::attention_backward`` custom ops and ``attention``, differentiable and traceable by
``torch.compile(fullgraph=True)``.

Functions: ``attention_forward`` (o, lse2), ``attention_backward`` (dq, dk, dv), ``attention``
(torch, autograd). The kernels (``attention_fwd_kernel``, ``attention_bwd_preprocess_kernel``,
``attention_bwd_dkdv_kernel``, ``attention_bwd_dq_kernel``) and their tile tables
(``CONFIGS``, ``WGMMA_CONFIGS``, ``OVERLAP_TILES``, ``candidates``) are here too, for
``.asm()`` and tests.
"""
from .backward import (attention_backward, attention_bwd_dkdv_kernel, attention_bwd_dq_kernel,
                       attention_bwd_preprocess_kernel)
from .configs import (CONFIGS, HEAD_DIMS, LOG2E, OVERLAP_TILES, WGMMA_CONFIGS, candidates,
                      config, overlap_candidates, preprocess_block, reload_tiles, tma_path)
from .forward import attention_forward, attention_fwd_kernel
from .torch_op import attention

__all__ = ["attention", "attention_forward", "attention_backward", "attention_fwd_kernel",
           "attention_bwd_preprocess_kernel", "attention_bwd_dkdv_kernel",
           "attention_bwd_dq_kernel", "CONFIGS", "WGMMA_CONFIGS", "OVERLAP_TILES", "HEAD_DIMS",
           "LOG2E", "candidates", "overlap_candidates", "config", "preprocess_block",
           "reload_tiles", "tma_path"]
