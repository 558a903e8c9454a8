"""A small transformer built on tessera.ops, trained for a few steps on several GPUs.

Every layer that does arithmetic is a Tessera kernel: LayerNorm and RMSNorm, the projections
and the MLP (matmul, with a fused bias + leaky_relu), causal attention and sliding-window
masked attention; all of them are differentiable torch custom ops, so DDP, FSDP2 and
torch.compile see ordinary autograd graphs. The autotuned kernels tune once for all ranks
(docs/distributed.md): each rank times a share of the configs and they all use one choice.

    torchrun --nproc_per_node=2 examples/distributed_training.py            # DDP
    torchrun --nproc_per_node=2 examples/distributed_training.py --fsdp     # FSDP2
    torchrun --nproc_per_node=2 examples/distributed_training.py --compile  # + torch.compile

Parameters stay in float32 (what the optimizer updates and the gradients are reduced in); the
kernels compute in bfloat16, as under autocast.
"""
import argparse
import os

import torch
import torch.distributed as dist
from torch import nn

from tessera.ops import attention, attention_masked, layer_norm, matmul, rms_norm

COMPUTE = torch.bfloat16


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(LayerNorm(x)), then x + MLP(RMSNorm(x))."""

    def __init__(self, dim: int, heads: int, hidden: int, window: int = 0) -> None:
        super().__init__()
        self.heads, self.window = heads, window
        self.norm1_w, self.norm1_b = nn.Parameter(torch.ones(dim)), nn.Parameter(torch.zeros(dim))
        self.qkv = nn.Parameter(torch.randn(dim, 3 * dim) / dim ** 0.5)
        self.proj = nn.Parameter(torch.randn(dim, dim) / dim ** 0.5)
        self.norm2_w = nn.Parameter(torch.ones(dim))
        self.fc1 = nn.Parameter(torch.randn(dim, hidden) / dim ** 0.5)
        self.fc1_b = nn.Parameter(torch.zeros(hidden))
        self.fc2 = nn.Parameter(torch.randn(hidden, dim) / hidden ** 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        rows = x.reshape(batch * seq, dim)
        h = layer_norm(rows, self.norm1_w.to(COMPUTE), self.norm1_b.to(COMPUTE), 1e-5)
        qkv = matmul(h, self.qkv.to(COMPUTE)).view(batch, seq, 3, self.heads, -1)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)          # (B, H, S, D) views
        if self.window:
            i = torch.arange(seq, device=x.device)
            mask = ((i[:, None] - i[None, :]).abs() < self.window)[None, None]
            o = attention_masked(q, k, v, mask=mask)
        else:
            o = attention(q, k, v, causal=True)
        o = o.transpose(1, 2).reshape(batch * seq, dim)
        rows = rows + matmul(o, self.proj.to(COMPUTE))
        h = rms_norm(rows, self.norm2_w.to(COMPUTE), 1e-6)
        h = matmul(h, self.fc1.to(COMPUTE), self.fc1_b.to(COMPUTE), activation="leaky_relu")
        rows = rows + matmul(h, self.fc2.to(COMPUTE))
        return rows.view(batch, seq, dim)


class TinyTransformer(nn.Module):
    def __init__(self, dim: int = 128, heads: int = 2, hidden: int = 256, layers: int = 2):
        super().__init__()
        # Even blocks attend causally, odd ones within a sliding window (masked attention).
        self.blocks = nn.ModuleList(Block(dim, heads, hidden, window=0 if i % 2 == 0 else 32)
                                    for i in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(COMPUTE)
        for block in self.blocks:
            x = block(x)
        return x


def loss_of(model: nn.Module, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return ((model(x).float() - target) ** 2).mean()


def batch(size: int, seq: int, dim: int, device, seed: int = 1):
    """The same global batch on every rank (each rank then takes its slice)."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(size, seq, dim, generator=gen)
    return x.to(device), torch.randn(size, seq, dim, generator=gen).to(device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fsdp", action="store_true", help="FSDP2 (fully_shard), not DDP")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)                                    # the same initial weights everywhere
    model = TinyTransformer().cuda()
    if args.fsdp:
        from torch.distributed.fsdp import fully_shard
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
    else:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])
    if args.compile:
        model = torch.compile(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, target = batch(4 * world, 128, 128, "cuda")
    mine = slice(4 * rank, 4 * (rank + 1))
    for step in range(args.steps):
        loss = loss_of(model, x[mine], target[mine])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total = loss.detach().clone()
        dist.all_reduce(total, op=dist.ReduceOp.AVG)
        if rank == 0:
            print(f"step {step}: loss {total.item():.5f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
