"""Autotuning: ``@tessera.autotune``, ``tessera.Config`` and ``@tessera.heuristics``.

    configs.py    Config: one candidate (meta-parameters, num_warps, num_stages)
    tuner.py      Autotuner: the tuning key, choosing, tuning, launching
    heuristics.py Heuristics: meta-parameters computed from the arguments
    backend.py    the machine side: target GPU, parallel compiles, loading, timing
    parallel.py   compile jobs on all CPU cores (forked workers)
    warming.py    the GPU kept warm with the first config compiled while the others compile
    refine.py     close finalists timed again in alternating rounds
    distributed.py one decision for every rank of a torch.distributed process group
    resources.py  shared memory / registers / occupancy model that drops configs
    results.py    tuning results on disk (the kernel cache's "tuning" namespace)
    progress.py   the progress bar on stderr
"""
from .backend import CompileJob, Outcome, Target, TuningBackend
from .configs import Config
from .heuristics import Heuristics, heuristics
from .tuner import Autotuner, autotune

__all__ = ["Autotuner", "CompileJob", "Config", "Heuristics", "Outcome", "Target",
           "TuningBackend", "autotune", "heuristics"]
