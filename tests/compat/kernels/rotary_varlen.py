"""Rotary embedding over a (batch, seq, heads, dim) tensor or packed variable-length sequences
(``cu_seqlens``, ``None`` when not packed), on a 3-D grid whose programs past a sequence's end
leave at once. After that early return the kernel rebases its scalar pointers into tiles of
pointers (``X = X + rows[:, None] * stride + cols[None, :]``): straight-line code after an
early exit may change a variable's type, as rotary kernels in public libraries do."""
import torch

import tessera as triton
import tessera.language as tl

from .common import assert_close, generator


@triton.jit
def rotary_kernel(OUT, X, COS, SIN, CU_SEQLENS, seqlen, rot_dim, stride_xb, stride_xs,
                  stride_xh, stride_ob, stride_os, stride_oh, IS_VARLEN: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_b = tl.program_id(1)
    pid_h = tl.program_id(2)
    half = rot_dim // 2
    if IS_VARLEN:
        start = tl.load(CU_SEQLENS + pid_b)
        seqlen = tl.load(CU_SEQLENS + pid_b + 1) - start
        X = X + start * stride_xs + pid_h * stride_xh
        OUT = OUT + start * stride_os + pid_h * stride_oh
    else:
        X = X + pid_b * stride_xb + pid_h * stride_xh
        OUT = OUT + pid_b * stride_ob + pid_h * stride_oh
    if pid_m * BLOCK_M >= seqlen:
        return
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_K)
    mask = (rows[:, None] < seqlen) & (cols[None, :] < half)
    COS = COS + rows[:, None] * half + cols[None, :]
    SIN = SIN + rows[:, None] * half + cols[None, :]
    X = X + rows[:, None] * stride_xs + cols[None, :]
    OUT = OUT + rows[:, None] * stride_os + cols[None, :]
    cos = tl.load(COS, mask=mask, other=1.0).to(tl.float32)
    sin = tl.load(SIN, mask=mask, other=0.0).to(tl.float32)
    x0 = tl.load(X, mask=mask, other=0.0).to(tl.float32)
    x1 = tl.load(X + half, mask=mask, other=0.0).to(tl.float32)
    tl.store(OUT, (x0 * cos - x1 * sin).to(OUT.dtype.element_ty), mask=mask)
    tl.store(OUT + half, (x0 * sin + x1 * cos).to(OUT.dtype.element_ty), mask=mask)


def apply_rotary(x, cos, sin, cu_seqlens=None, max_seqlen=None):
    """x: (batch, seq, heads, dim), or (total, heads, dim) with cu_seqlens; cos/sin:
    (seq, rot_dim // 2). Dimensions past rot_dim are copied."""
    varlen = cu_seqlens is not None
    if varlen:
        _, heads, _ = x.shape
        batch, seqlen = cu_seqlens.numel() - 1, max_seqlen
    else:
        batch, seqlen, heads, _ = x.shape
    rot_dim = cos.shape[1] * 2
    out = x.clone()
    grid = lambda meta: (triton.cdiv(seqlen, meta["BLOCK_M"]), batch, heads)  # noqa: E731
    rotary_kernel[grid](out, x, cos, sin, cu_seqlens, seqlen, rot_dim,
                        0 if varlen else x.stride(0), x.stride(-3), x.stride(-2),
                        0 if varlen else out.stride(0), out.stride(-3), out.stride(-2),
                        IS_VARLEN=varlen, BLOCK_M=8,
                        BLOCK_K=triton.next_power_of_2(rot_dim // 2))
    return out


def _reference(x, cos, sin):
    """x: (seq, heads, dim) in float64."""
    half = cos.shape[1]
    c, s = cos[:x.shape[0], None, :].double(), sin[:x.shape[0], None, :].double()
    out = x.double().clone()
    x0, x1 = out[..., :half].clone(), out[..., half:2 * half].clone()
    out[..., :half] = x0 * c - x1 * s
    out[..., half:2 * half] = x0 * s + x1 * c
    return out


def check(device):
    g = generator(device, 21)
    angles = torch.rand(50, 12, device=device, generator=g) * 6
    cos, sin = torch.cos(angles), torch.sin(angles)
    x = torch.randn(3, 37, 2, 30, device=device, generator=g)
    ref = torch.stack([_reference(x[b], cos, sin) for b in range(3)])
    assert_close(apply_rotary(x, cos, sin), ref, torch.float32, "batched")
    lengths = [5, 1, 29]
    cu = torch.tensor([0, 5, 6, 35], device=device, dtype=torch.int32)
    packed = torch.randn(35, 2, 30, device=device, generator=g)
    ref = torch.cat([_reference(packed[int(cu[i]):int(cu[i + 1])], cos, sin)
                     for i in range(len(lengths))])
    assert_close(apply_rotary(packed, cos, sin, cu, max(lengths)), ref, torch.float32,
                 "packed")


def bench(device):
    angles = torch.rand(4096, 64, device=device)
    x = torch.randn(8, 4096, 16, 128, device=device)
    return apply_rotary, (x, torch.cos(angles), torch.sin(angles))
