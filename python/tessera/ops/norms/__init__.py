"""RMSNorm and LayerNorm, forward and backward: memory-bound row kernels.

Forward: a program normalizes BLOCK_ROWS rows of H at once (tiles of about 2048 elements),
in float32. Backward: dx row by row, and the weight (and bias) gradients, sums over *all*
rows, in two stages: each program walks many row blocks keeping its sums in float32 registers
and writes one partial row, then `sum_partials` adds the partial rows (no atomics). The
backward's grid is one wave of resident programs (from ptxas's register count), and its tile
keeps LayerNorm's four row reductions within a warp. tutorials/05-rms-norm.py derives it.

Files: kernels.py (the five kernels), tiles.py (tiles, the backward's grid, the partial sums),
rms.py and layer.py (the launches and each one's custom ops).
"""
from .kernels import layer_norm_bwd, layer_norm_fwd, rms_norm_bwd, rms_norm_fwd, sum_partials
from .layer import layer_norm, layer_norm_backward, layer_norm_forward
from .rms import rms_norm, rms_norm_backward, rms_norm_forward
from .tiles import PARTIALS_CONFIG, backward_config, backward_programs, reduce_partials, \
    tile_config

__all__ = ["PARTIALS_CONFIG", "backward_config", "backward_programs", "layer_norm",
           "layer_norm_backward", "layer_norm_bwd", "layer_norm_forward", "layer_norm_fwd",
           "reduce_partials", "rms_norm", "rms_norm_backward", "rms_norm_bwd", "rms_norm_forward",
           "rms_norm_fwd", "sum_partials", "tile_config"]
