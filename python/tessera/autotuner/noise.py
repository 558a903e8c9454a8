"""Timing noise on purpose (TESSERA_AUTOTUNE_NOISE), to test that ranks agree on configs.

Real timings differ a little from rank to rank; whether that flips a choice depends on how
close the configs are. To show it every time, a test sets ``TESSERA_AUTOTUNE_NOISE=A[:SEED]``
and each measured time is multiplied by a factor in [1, 1 + A): a hash of (seed, global rank,
kernel, tuning key, candidate index), so a run is reproducible while ranks see different
noise. Tuned alone, ranks then pick different configs; tuned together (distributed.py), they
choose one config from one set of numbers.
"""
from __future__ import annotations

import hashlib

from ..config import knobs
from . import ranks


def perturb(ms: float, key_text: str, index: int) -> float:
    """``ms`` times this rank's noise factor for candidate ``index`` of the tuning
    ``key_text`` (distributed.key_text); ``ms`` itself when the knob is off."""
    spec = knobs.autotune_noise
    if spec is None:
        return ms
    amplitude, seed = spec
    text = f"{seed}/{ranks.global_rank()}/{key_text}/{index}"
    unit = int(hashlib.sha256(text.encode()).hexdigest()[:13], 16) / float(16 ** 13)  # [0, 1)
    return ms * (1.0 + amplitude * unit)
