"""Rotary position embedding applied in place to q and k, as LLM kernel libraries write it:
one program per (batch, position), all heads at once in a 2-D tile, the two halves of the head
dimension rotated with cos/sin rows loaded once."""
import torch

import tessera as triton
import tessera.language as tl

from .common import assert_close, generator


@triton.jit
def _triton_rope(q_ptr, q_row_stride, k_ptr, k_row_stride, cos, cos_row_stride, sin,
                 sin_row_stride, sl, n_qh: tl.constexpr, n_kh: tl.constexpr, hd: tl.constexpr,
                 pad_n_qh: tl.constexpr, pad_n_kh: tl.constexpr, pad_hd: tl.constexpr):
    pid = tl.program_id(0)
    q_ptr = q_ptr + pid * q_row_stride
    k_ptr = k_ptr + pid * k_row_stride
    cos_row_idx = pid % sl
    cos = cos + cos_row_idx * cos_row_stride
    sin = sin + cos_row_idx * sin_row_stride
    cos_offsets = tl.arange(0, pad_hd // 2)
    cos_mask = cos_offsets < hd // 2
    cos_row = tl.load(cos + cos_offsets, mask=cos_mask, other=0)
    sin_row = tl.load(sin + cos_offsets, mask=cos_mask, other=0)

    first_half_q_offsets = tl.arange(0, pad_n_qh)[:, None] * hd + tl.arange(0, pad_hd // 2)[None, :]
    first_half_k_offsets = tl.arange(0, pad_n_kh)[:, None] * hd + tl.arange(0, pad_hd // 2)[None, :]
    first_q_mask = ((tl.arange(0, pad_n_qh)[:, None] < n_qh)
                    & (tl.arange(0, pad_hd // 2)[None, :] < hd // 2))
    first_k_mask = ((tl.arange(0, pad_n_kh)[:, None] < n_kh)
                    & (tl.arange(0, pad_hd // 2)[None, :] < hd // 2))
    q_tile_1 = tl.load(q_ptr + first_half_q_offsets, mask=first_q_mask, other=0).to(sin_row.dtype)
    k_tile_1 = tl.load(k_ptr + first_half_k_offsets, mask=first_k_mask, other=0).to(sin_row.dtype)

    second_half_q_offsets = first_half_q_offsets + (hd // 2)
    second_half_k_offsets = first_half_k_offsets + (hd // 2)
    q_tile_2 = tl.load(q_ptr + second_half_q_offsets, mask=first_q_mask, other=0).to(sin_row.dtype)
    k_tile_2 = tl.load(k_ptr + second_half_k_offsets, mask=first_k_mask, other=0).to(sin_row.dtype)

    new_q_tile_1 = q_tile_1 * cos_row - q_tile_2 * sin_row
    tl.store(q_ptr + first_half_q_offsets, new_q_tile_1, mask=first_q_mask)
    new_q_tile_2 = q_tile_2 * cos_row + q_tile_1 * sin_row
    tl.store(q_ptr + second_half_q_offsets, new_q_tile_2, mask=first_q_mask)
    new_k_tile_1 = k_tile_1 * cos_row - k_tile_2 * sin_row
    tl.store(k_ptr + first_half_k_offsets, new_k_tile_1, mask=first_k_mask)
    new_k_tile_2 = k_tile_2 * cos_row + k_tile_1 * sin_row
    tl.store(k_ptr + second_half_k_offsets, new_k_tile_2, mask=first_k_mask)


def rope_forward(q, k, cos, sin):
    # q: (batch, seq, heads, head_dim), contiguous; cos/sin: (seq, head_dim // 2)
    batch_size, seq_len, n_q_head, head_dim = q.shape
    n_kv_head = k.shape[2]
    pad_hd = triton.next_power_of_2(head_dim)
    pad_n_q_head = triton.next_power_of_2(n_q_head)
    pad_n_kv_head = triton.next_power_of_2(n_kv_head)
    n_row = batch_size * seq_len
    q = q.contiguous()
    k = k.contiguous()
    _triton_rope[(n_row, )](q, q.stride(1), k, k.stride(1), cos, cos.stride(-2), sin,
                            sin.stride(-2), seq_len, n_q_head, n_kv_head, head_dim,
                            pad_n_q_head, pad_n_kv_head, pad_hd)
    return q, k


def reference(x, cos, sin):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


def check(device):
    g = generator(device, 10)
    shapes = ((1, 1, 1, 1, 2), (2, 5, 3, 1, 12)) if device == "cpu" else \
        ((1, 1, 1, 1, 2), (2, 333, 32, 8, 128), (3, 77, 12, 4, 96))
    for batch, seq, n_qh, n_kh, hd in shapes:
        q = torch.randn(batch, seq, n_qh, hd, device=device, generator=g)
        k = torch.randn(batch, seq, n_kh, hd, device=device, generator=g)
        angle = torch.rand(seq, hd // 2, device=device, generator=g) * 6.3
        cos, sin = torch.cos(angle), torch.sin(angle)
        ref_q = reference(q.double(), cos.double(), sin.double())
        ref_k = reference(k.double(), cos.double(), sin.double())
        out_q, out_k = rope_forward(q.clone(), k.clone(), cos, sin)
        assert_close(out_q, ref_q, torch.float32, f"rope q {q.shape}", factor=10)
        assert_close(out_k, ref_k, torch.float32, f"rope k {k.shape}", factor=10)


def bench(device):
    q = torch.randn(4, 4096, 32, 128, device=device).half()
    k = torch.randn(4, 4096, 8, 128, device=device).half()
    angle = torch.rand(4096, 64, device=device)
    return rope_forward, (q, k, torch.cos(angle), torch.sin(angle))
