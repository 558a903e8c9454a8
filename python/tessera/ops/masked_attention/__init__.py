"""Attention with a run-time mask and an additive, learnable bias (Flash-DMA style):
``attention_masked`` (torch, autograd, ``torch.compile``), ``attention_masked_forward`` and
``attention_masked_backward`` (torch or NumPy). The mask and bias broadcast over batch, heads
and query rows through 0 strides; key/value heads may be grouped (Hkv divides Hq); the
128 x 128 blocks the mask hides are found by a first small kernel and never visited
(blocks.py); the kernels are the dense flash-attention kernels' structure and tiles
(forward.py, backward.py); the ``tessera::attention_masked_*`` custom ops are in torch_op.py.
"""
from .backward import (attention_masked_backward, attention_masked_bwd_dkdv_kernel,
                       attention_masked_bwd_dq_kernel)
from .blocks import KEYS, ROWS, SUPER, block_lists, block_table, mask_blocks_kernel
from .forward import attention_masked_forward, attention_masked_fwd_kernel
from .torch_op import attention_masked

__all__ = ["attention_masked", "attention_masked_forward", "attention_masked_backward",
           "attention_masked_fwd_kernel", "attention_masked_bwd_dkdv_kernel",
           "attention_masked_bwd_dq_kernel", "mask_blocks_kernel", "block_table",
           "block_lists", "SUPER", "ROWS", "KEYS"]
