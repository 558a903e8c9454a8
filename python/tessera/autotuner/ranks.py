"""This process's place among torch.distributed ranks, and the one rule that picks a config
from timings: the bottom of the distributed tuning (distributed.py), which the timing noise
(noise.py) and the group's refinement (refine.py) need as well, without importing the
group's protocol."""
from __future__ import annotations

import sys
from typing import Dict


def torch_distributed():
    """torch.distributed when torch is already imported and a process group is initialized,
    else None. Never imports torch: a program without it pays nothing."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    dist = getattr(torch, "distributed", None)
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist


def global_rank() -> int:
    """This process's rank in the world, 0 without torch.distributed."""
    dist = torch_distributed()
    return dist.get_rank() if dist is not None else 0


def fastest(timings: Dict[int, float]) -> int:
    """The index of the fastest candidate; equal times go to the lower index. Every rank
    applies it to the same gathered numbers, so all of them choose the same config."""
    return min(timings, key=lambda index: (timings[index], index))
