"""``tessera.Config``: one candidate of an autotuned kernel (meta-parameters + launch options).

As ``triton.Config``: ``kwargs`` are constexpr values passed to the kernel, ``num_warps`` and
``num_stages`` go to the compiler. Configs compare and hash by value, so they can key dicts
(``kernel.configs_timings``) and be matched against results persisted on disk.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Dict, Optional


class Config:
    """A set of meta-parameter values to try.

    Example::

        tessera.Config({"BLOCK": 1024}, num_warps=4, num_stages=3)

    ``pre_hook(kwargs)`` runs before each launch with this config (kwargs: every argument by
    name plus the config's values). ``maxnreg`` caps the registers per thread (PTX .maxnreg),
    as Triton's; ``num_ctas`` > 1 (thread-block clusters) is not supported yet: it raises.
    """

    def __init__(self, kwargs: Dict[str, Any], num_warps: int = 4, num_stages: int = 3,
                 num_ctas: int = 1, maxnreg: Optional[int] = None,
                 pre_hook: Optional[Callable[[Dict[str, Any]], None]] = None) -> None:
        if not isinstance(kwargs, dict):
            raise TypeError(f"Config takes a dict of meta-parameters, got {type(kwargs).__name__}")
        if not (isinstance(num_warps, int) and num_warps > 0 and num_warps & (num_warps - 1) == 0):
            raise ValueError(f"num_warps must be a power of two, got {num_warps!r}")
        if not (isinstance(num_stages, int) and num_stages >= 1):
            raise ValueError(f"num_stages must be a positive int, got {num_stages!r}")
        if num_ctas != 1:
            raise NotImplementedError("Config(num_ctas > 1): thread-block clusters are not "
                                      "supported by Tessera yet")
        if maxnreg is not None and (isinstance(maxnreg, bool) or not isinstance(maxnreg, int)
                                    or not 1 <= maxnreg <= 255):
            raise ValueError(f"Config(maxnreg=...) must be an int in [1, 255], got {maxnreg!r}")
        self.kwargs = dict(kwargs)
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.num_ctas = num_ctas
        self.maxnreg = maxnreg
        self.pre_hook = pre_hook

    def all_kwargs(self) -> Dict[str, Any]:
        """The meta-parameters and launch options, as passed to ``kernel[grid](...)``."""
        options = {"num_warps": self.num_warps, "num_stages": self.num_stages}
        if self.maxnreg is not None:
            options["maxnreg"] = self.maxnreg
        return {**self.kwargs, **options}

    def _identity(self) -> tuple:
        return (tuple(sorted(self.kwargs.items())), self.num_warps, self.num_stages,
                self.maxnreg, self.pre_hook)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Config) and self._identity() == other._identity()

    def __hash__(self) -> int:
        try:
            return hash(self._identity())
        except TypeError:  # an unhashable meta-parameter value
            return hash(repr(self._identity()))

    def __str__(self) -> str:
        parts = [f"{k}: {v}" for k, v in self.kwargs.items()]
        parts += [f"num_warps: {self.num_warps}", f"num_stages: {self.num_stages}"]
        if self.maxnreg is not None:
            parts.append(f"maxnreg: {self.maxnreg}")
        return ", ".join(parts)

    def __repr__(self) -> str:
        extra = f", maxnreg={self.maxnreg}" if self.maxnreg is not None else ""
        return (f"Config({self.kwargs!r}, num_warps={self.num_warps}, "
                f"num_stages={self.num_stages}{extra})")

    # ------------------------------------------------------------------ persistence

    def to_json(self) -> Optional[Dict[str, Any]]:
        """A JSON form for the tuning cache, or None when a value has none (a kernel with
        such a config is tuned again in every process)."""
        record = {"kwargs": self.kwargs, "num_warps": self.num_warps,
                  "num_stages": self.num_stages}
        if self.maxnreg is not None:  # absent otherwise: records stored before stay valid
            record["maxnreg"] = self.maxnreg
        try:
            text = json.dumps(record, sort_keys=True)
        except (TypeError, ValueError):
            return None
        if json.loads(text) != record:  # e.g. a tuple became a list: not the same value back
            return None
        return record
