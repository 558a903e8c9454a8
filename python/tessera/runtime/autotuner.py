"""``triton.runtime.autotuner`` as a module, with Triton's constructor order.

Libraries subclass ``Autotuner`` (an autotuner that first looks for a stored best config, say)
and build it the way Triton's ``autotune`` decorator does:
``Autotuner(fn, fn.arg_names, configs, key, reset_to_zero, restore_value, pre_hook=...,
...)``; ``Heuristics(fn, fn.arg_names, values)`` likewise. The classes here take that order and
are Tessera's autotuner and heuristics otherwise (a subclass may override ``run`` and call
``super().run(*args, **kwargs)``, or replace ``self.configs`` before the first launch).

Example::

    from tessera.runtime.autotuner import Autotuner

    class FirstConfigOnly(Autotuner):
        def run(self, *args, **kwargs):
            self.configs = self.configs[:1]
            return super().run(*args, **kwargs)

    tuned = FirstConfigOnly(kernel, kernel.arg_names, configs, ["n"], None, None)
    tuned[grid](x, y, n)
"""
from typing import Any, Callable, Dict, Optional, Sequence

from ..autotuner import Autotuner as _Autotuner
from ..autotuner import Config, autotune, heuristics
from ..autotuner import Heuristics as _Heuristics


def _check_names(kind: str, fn: Any, arg_names: Sequence[str]) -> None:
    names = list(getattr(fn, "arg_names", arg_names))
    if list(arg_names) != names:
        raise TypeError(f"{kind}: arg_names {list(arg_names)} are not the parameters of the "
                        f"kernel {names}")


class _TritonOrder(type):
    """``isinstance(kernel, Autotuner)`` holds for every Tessera autotuner (one made by
    ``@autotune`` too), as it does in Triton, where the decorator builds this class."""

    def __instancecheck__(cls, obj: Any) -> bool:
        base = cls.__dict__.get("_tessera_base")
        return isinstance(obj, base) if base is not None else super().__instancecheck__(obj)


class Autotuner(_Autotuner, metaclass=_TritonOrder):
    """Tessera's autotuner built with Triton's argument order (``arg_names`` second, checked
    against the kernel's parameters)."""
    _tessera_base = _Autotuner

    def __init__(self, fn: Any, arg_names: Sequence[str], configs: Sequence[Config],
                 key: Sequence[str], reset_to_zero: Optional[Sequence[str]] = None,
                 restore_value: Optional[Sequence[str]] = None,
                 pre_hook: Optional[Callable] = None, post_hook: Optional[Callable] = None,
                 prune_configs_by: Optional[Dict[str, Any]] = None,
                 warmup: Optional[float] = None, rep: Optional[float] = None,
                 use_cuda_graph: bool = False, do_bench: Optional[Callable] = None,
                 cache_results: bool = False) -> None:
        super().__init__(fn, configs, key, prune_configs_by=prune_configs_by,
                         reset_to_zero=reset_to_zero, restore_value=restore_value,
                         pre_hook=pre_hook, post_hook=post_hook, do_bench=do_bench,
                         cache_results=cache_results, warmup=warmup, rep=rep,
                         use_cuda_graph=use_cuda_graph)
        _check_names("Autotuner", self.jit_fn, arg_names)


class Heuristics(_Heuristics, metaclass=_TritonOrder):
    """Tessera's heuristics built with Triton's argument order ``(fn, arg_names, values)``."""
    _tessera_base = _Heuristics

    def __init__(self, fn: Any, arg_names: Sequence[str],
                 values: Dict[str, Callable[[Dict[str, Any]], Any]]) -> None:
        super().__init__(fn, values)
        _check_names("Heuristics", self.jit_fn, arg_names)


__all__ = ["Autotuner", "Config", "Heuristics", "autotune", "heuristics"]
