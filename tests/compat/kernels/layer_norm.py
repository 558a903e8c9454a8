"""LayerNorm forward in the style of Triton's layer-norm tutorial: one program per row, the
row walked in BLOCK_SIZE chunks, mean and rstd stored for a backward pass, a block size chosen
from the element size and next_power_of_2, and a warp count from the block size."""
import torch

import tessera as triton
import tessera.language as tl

from .common import assert_close, generator


@triton.jit
def _layer_norm_fwd_fused(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        x_hat = (x - mean) * rstd
        y = x_hat * w + b
        tl.store(Y + cols, y, mask=mask)


def layer_norm(x, normalized_shape, weight, bias, eps):
    y = torch.empty_like(x)
    x_arg = x.reshape(-1, x.shape[-1])
    M, N = x_arg.shape
    mean = torch.empty((M, ), dtype=torch.float32, device=x.device)
    rstd = torch.empty((M, ), dtype=torch.float32, device=x.device)
    MAX_FUSED_SIZE = 65536 // x.element_size()
    BLOCK_SIZE = min(MAX_FUSED_SIZE, triton.next_power_of_2(N))
    if N > BLOCK_SIZE:
        raise RuntimeError("This layer norm doesn't support feature dim >= 64KB.")
    num_warps = min(max(BLOCK_SIZE // 256, 1), 8)
    _layer_norm_fwd_fused[(M, )](x_arg, y, weight, bias, mean, rstd, x_arg.stride(0), N, eps,
                                 BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps, num_ctas=1)
    return y, mean, rstd


def check(device):
    g = generator(device, 4)
    for M, N in ((1, 1), (5, 300), (17, 1000) if device == "cpu" else (1151, 8192)):
        x = torch.randn(M, N, device=device, generator=g).half()
        w = torch.rand(N, device=device, generator=g).half()
        b = torch.rand(N, device=device, generator=g).half()
        y, mean, rstd = layer_norm(x, (N, ), w, b, 1e-5)
        ref = torch.nn.functional.layer_norm(x.double(), (N, ), w.double(), b.double(), 1e-5)
        assert_close(y, ref, torch.float16, f"layer_norm {M}x{N}")
        assert_close(mean, x.double().mean(1), torch.float32, "mean", factor=10)


def bench(device):
    N = 8192
    x = torch.randn(4096, N, device=device).half()
    w = torch.rand(N, device=device).half()
    b = torch.rand(N, device=device).half()
    return layer_norm, (x, (N, ), w, b, 1e-5)
