"""The per-kernel report (tessera.report) of the library's kernels at benchmark shapes, for the
configs their autotuners pick: softmax, matmul, attention (forward, dK/dV, dQ) and masked
attention (forward, dK/dV, dQ at 50% live blocks), each with its byte and FLOP model.

    python -m tessera.report benchmarks/kernel_reports.py            # GPU: times and rooflines
    python -m tessera.report benchmarks/kernel_reports.py --arch sm_90a   # no GPU: static part

On a GPU the inputs are CUDA tensors (the autotuners tune first, then the chosen config is
compiled, reported and timed); without one they are NumPy arrays (static part only). Byte
models are compulsory DRAM traffic (each input read once, each output written once).
"""
from __future__ import annotations

import numpy as np


def _inputs():
    """(zeros(shape, dtype), strides(x)) for CUDA tensors when a GPU is there, else NumPy."""
    try:
        import torch
        if torch.cuda.is_available():
            def zeros(shape, dtype="float16"):
                return torch.randn(shape, device="cuda").to(getattr(torch, dtype))
            return zeros, lambda x: tuple(x.stride())
    except ImportError:
        pass

    def zeros_np(shape, dtype="float16"):
        return np.zeros(shape, dtype)
    return zeros_np, lambda x: tuple(s // x.itemsize for s in x.strides)


def report_cases():
    import tessera
    from tessera.ops.flash_attention import LOG2E, preprocess_block, reload_tiles
    from tessera.ops.flash_attention.backward import _tuned_dkdv, _tuned_dq
    from tessera.ops.flash_attention.forward import _tuned_fwd
    from tessera.ops.fused_softmax import softmax_config, softmax_kernel
    from tessera.ops.gemm import tuned_matmul_kernel
    from tessera.ops.masked_attention.model import report_cases as masked_cases
    from tessera.report import case
    zeros, strides = _inputs()
    cases = []

    rows, cols = 8192, 4096  # softmax: read x, write y (fp32)
    x = zeros((rows, cols), "float32")
    config = softmax_config(cols)
    cases.append(case(softmax_kernel, x, x, strides(x)[0], strides(x)[0], rows, cols,
                      grid=(tessera.cdiv(rows, config["BLOCK_ROWS"]),), bytes=2 * 4 * rows * cols,
                      flops=4 * rows * cols, **config))

    M = N = K = 4096  # matmul fp16: read a, b, write c
    a = zeros((M, K))
    cases.append(case(tuned_matmul_kernel, a, a, a, a, M, N, K, *strides(a), *strides(a),
                      *strides(a), HAS_BIAS=False, ACTIVATION="",
                      grid=lambda meta: (tessera.cdiv(M, meta["BLOCK_M"])
                                         * tessera.cdiv(N, meta["BLOCK_N"]),),
                      bytes=3 * 2 * M * N, flops=2 * M * N * K))

    B, H, S, D = 4, 16, 4096, 128  # attention, not causal
    q = zeros((B, H, S, D))
    lse = zeros((B, H, S), "float32")
    st = strides(q)[:3]
    tensor = B * H * S * D * 2
    flops = 4 * B * H * S * S * D
    flags = dict(D=D, CAUSAL=False, RELOAD=reload_tiles(q))
    cases.append(case(_tuned_fwd, q, q, q, q, lse, 0.1 * LOG2E, H, S, *st * 4,
                      grid=lambda meta: (tessera.cdiv(S, meta["BLOCK_M"]), B * H),
                      bytes=4 * tensor + B * H * S * 4, flops=flops, **flags))
    cases.append(case(_tuned_dkdv, q, q, q, q, q, q, lse, lse, 0.1, 0.1 * LOG2E, H, S,
                      *st * 6, grid=lambda meta: (tessera.cdiv(S, meta["BLOCK_N"]), B * H),
                      bytes=6 * tensor + 2 * B * H * S * 4, flops=2 * flops, **flags))
    cases.append(case(_tuned_dq, q, q, q, q, q, lse, lse, 0.1, 0.1 * LOG2E, H, S, *st * 5,
                      grid=lambda meta: (tessera.cdiv(S, meta["BLOCK_M"]), B * H),
                      bytes=5 * tensor + 2 * B * H * S * 4, flops=1.5 * flops, **flags))
    assert preprocess_block(D) > 0
    return cases + masked_cases(S=4096, D=128, live=0.5)
