"""Cross-entropy forward with its gradient written in place, as LLM kernel libraries write it:
an online log-sum-exp over BLOCK_SIZE chunks of the vocabulary, ignored labels, the row's
early exit (``return`` under a runtime condition), and ``do_not_specialize`` on the count of
non-ignored rows."""
import torch

import tessera as triton
import tessera.language as tl

from .common import assert_close, generator

MAX_FUSED_SIZE = 65536 // 2


@triton.jit(do_not_specialize=["n_non_ignore"])
def cross_entropy_kernel(X_ptr, X_stride, Y_ptr, Y_stride, loss_ptr, loss_stride, n_cols,
                         n_non_ignore, ignore_index, BLOCK_SIZE: tl.constexpr):
    program_id = tl.program_id(0).to(tl.int64)
    Y_ptr += program_id * Y_stride
    y = tl.load(Y_ptr)
    X_ptr += program_id * X_stride
    if y == ignore_index:
        for i in range(0, n_cols, BLOCK_SIZE):
            X_offsets = i + tl.arange(0, BLOCK_SIZE)
            tl.store(X_ptr + X_offsets, 0.0, mask=X_offsets < n_cols)
        return
    loss_ptr += program_id * loss_stride

    m = float("-inf")
    d = 0.0
    ori_X_y = tl.load(X_ptr + y).cast(tl.float32)
    for i in range(0, n_cols, BLOCK_SIZE):
        X_offsets = i + tl.arange(0, BLOCK_SIZE)
        X_block = tl.load(X_ptr + X_offsets, mask=X_offsets < n_cols,
                          other=float("-inf")).cast(tl.float32)
        block_max = tl.max(X_block)
        m_new = tl.maximum(m, block_max)
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(X_block - m_new))
        m = m_new
    lse = m + tl.log(d)

    for i in range(0, n_cols, BLOCK_SIZE):
        X_offsets = i + tl.arange(0, BLOCK_SIZE)
        X_block = tl.load(X_ptr + X_offsets, mask=X_offsets < n_cols,
                          other=float("-inf")).cast(tl.float32)
        X_block = tl.exp(X_block - lse) / n_non_ignore
        X_block = tl.where(X_offsets == y, X_block - 1.0 / n_non_ignore, X_block)
        tl.store(X_ptr + X_offsets, X_block, mask=X_offsets < n_cols)

    loss = (lse - ori_X_y) / n_non_ignore
    tl.store(loss_ptr, loss)


def cross_entropy_forward(_input, target, ignore_index=-100):
    BT, V = _input.shape
    BLOCK_SIZE = min(MAX_FUSED_SIZE, triton.next_power_of_2(V))
    loss_1d = torch.zeros(BT, dtype=torch.float32, device=_input.device)
    n_non_ignore = (target != ignore_index).sum().item()
    if _input.stride(-1) != 1:
        _input = _input.contiguous()
    cross_entropy_kernel[(BT, )](_input, _input.stride(-2), target, target.stride(-1), loss_1d,
                                 loss_1d.stride(-1), V, n_non_ignore, ignore_index,
                                 BLOCK_SIZE=BLOCK_SIZE, num_warps=32 if V > 8192 else 8)
    return torch.sum(loss_1d), _input


def check(device):
    g = generator(device, 9)
    for BT, V in ((1, 1), (7, 300), (9, 2000) if device == "cpu" else (1024, 32000)):
        logits = torch.randn(BT, V, device=device, generator=g)
        target = torch.randint(0, V, (BT, ), device=device, generator=g)
        if BT > 2:
            target[1] = -100
        ref_in = logits.double().requires_grad_()
        ref = torch.nn.functional.cross_entropy(ref_in, target, ignore_index=-100)
        ref.backward()
        loss, grad = cross_entropy_forward(logits.clone(), target)
        assert_close(loss, ref, torch.float32, f"cross entropy loss {BT}x{V}", factor=10)
        assert_close(grad, ref_in.grad, torch.float32, f"cross entropy grad {BT}x{V}",
                     factor=10)


def bench(device):
    logits = torch.randn(4096, 32000, device=device)
    target = torch.randint(0, 32000, (4096, ), device=device)
    return cross_entropy_forward, (logits, target)
