"""``@tessera.autotune``: Triton's autotuning decorator, stacked above @jit (or @heuristics).

A launch of an autotuned kernel computes its tuning key (the ``key`` arguments' values and
every argument's dtype) and launches with the config chosen for that key. The first launch
with a new key chooses it:

1. the tuning result on disk, when one matches (results.py), else
2. tune: prune (``early_config_prune``, ``perf_model`` + ``top_k``, then the resource model:
   a block with more threads than the device allows) → compile every surviving config at once
   on all CPU cores (backend.py; each worker drops configs whose tile IR cannot fit, then
   compiles, then drops configs whose registers/shared memory cannot fit; the GPU is kept warm
   meanwhile with the first config compiled, warming.py) → time each compiled config on the
   GPU, then the finalists within a few percent of the fastest again in alternating rounds
   (refine.py) → keep the fastest, store it on disk.

``TESSERA_AUTOTUNE=force`` ignores stored results, ``off`` never tunes (stored result, else
the first config). In interpret mode the first config is used, untimed (CPU timings mean
nothing), and one line on stderr says so.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import logging
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..runtime import descriptor_arguments, tuple_arguments
from ..config import knobs
from . import backend as backends
from ..device import resources
from . import distributed, noise, refine, results, warming
from .configs import Config
from .heuristics import Heuristics, decorator_chain
from .progress import Progress
from ..tracebacks import api_boundary

_log = logging.getLogger("tessera.autotune")
_MODES = ("", "force", "off")
# The refinement of close finalists (refine.py) and the warm-up before the pass (warming.py).
REFINE_MARGIN = refine.REFINE_MARGIN
REFINE_FINALISTS = refine.REFINE_FINALISTS
REFINE_ROUNDS = refine.REFINE_ROUNDS
REFINE_ROUND_MS = refine.REFINE_ROUND_MS
WARM_UP_MS = warming.WARM_UP_MS


def _zero(value) -> None:
    if value is None:  # an optional buffer not passed this launch: nothing to zero
        return
    if hasattr(value, "zero_"):
        value.zero_()
    else:
        value[...] = 0


def _snapshot(value):
    return value.clone() if hasattr(value, "clone") else value.copy()


def _restore(value, saved) -> None:
    if hasattr(value, "copy_"):
        value.copy_(saved)
    else:
        value[...] = saved


@dataclass
class _Launch:
    """One launch of an autotuned kernel: its arguments as given, and all of them by name."""
    args: tuple
    kwargs: Dict[str, Any]
    named: Dict[str, Any]
    grid: Any


# autotune(spills=...): "allow" times every config that compiles (Triton's rule); "avoid" times
# only the configs whose kernel spills no register to local memory, whenever at least one
# compiled without spills (all spill: all are timed, as with "allow").
SPILL_RULES = ("allow", "avoid")


def _spilled_bytes(outcome) -> int:
    metadata = outcome.built[0] if outcome.built else {}
    return int(metadata.get("spill_stores", 0)) + int(metadata.get("spill_loads", 0))


def _without_spills(built: List[tuple], failures: Dict[int, str]) -> List[tuple]:
    """``built`` (index, config, job, outcome) less the configs that spill, each then recorded
    in ``failures`` with its figures, when another config compiled without spilling."""
    clean = [entry for entry in built if _spilled_bytes(entry[3]) == 0]
    if not clean:
        return built
    for index, _config, _job, outcome in built:
        if _spilled_bytes(outcome):
            metadata = outcome.built[0]
            failures[index] = (f"pruned after compiling: spills {metadata.get('spill_stores', 0)} "
                               f"bytes stored / {metadata.get('spill_loads', 0)} loaded "
                               f"(autotune spills='avoid')")
    return clean


class Autotuner:
    """An autotuned kernel: ``kernel[grid](*args)``; see :func:`autotune`.

    After a tuning: ``best_config``, ``configs_timings`` (Config -> ms), ``failed_configs``
    (list of (Config, reason), configs dropped by the resource model included), ``bench_time``
    (seconds the tuning took), of which ``compile_time`` compiling (in parallel, on
    ``compile_workers`` processes) and ``benchmark_time`` timing; ``cache`` maps tuning keys to
    configs in this process.
    ``backend`` (a backend.TuningBackend) can be replaced, e.g. by a fake in tests.
    """

    def __init__(self, fn, configs: Sequence[Config], key: Sequence[str],
                 prune_configs_by: Optional[Dict[str, Any]] = None,
                 reset_to_zero: Optional[Sequence[str]] = None,
                 restore_value: Optional[Sequence[str]] = None,
                 pre_hook: Optional[Callable] = None, post_hook: Optional[Callable] = None,
                 do_bench: Optional[Callable] = None, cache_results: bool = True,
                 warmup: Optional[float] = None, rep: Optional[float] = None,
                 use_cuda_graph: bool = False, *, distributed: Optional[bool] = None,
                 process_group: Any = None, spills: str = "allow") -> None:
        chain = decorator_chain(fn)
        if any(isinstance(layer, Autotuner) for layer in chain):
            raise TypeError("@autotune cannot be stacked above another @autotune")
        self.fn = fn
        self.jit_fn = chain[-1]
        # A @jit kernel right below: its launches go through kernel[grid] (the C++ fast path).
        self._bracket_launch = fn is self.jit_fn and getattr(fn, "__tessera_jit__", False)
        self.base_fn = self.jit_fn.fn  # the Python function under every decorator (Triton's)
        self.heuristics = [layer for layer in chain if isinstance(layer, Heuristics)]
        self.arg_names = [p.name for p in self.jit_fn.params]
        self.__name__ = self.jit_fn.__name__
        functools.update_wrapper(self, self.jit_fn.fn)
        self.configs = list(configs) or [Config({})]
        if not all(isinstance(c, Config) for c in self.configs):
            raise TypeError("autotune: configs must be tessera.Config objects")
        self.keys = list(key)
        for what, names in (("key", self.keys), ("reset_to_zero", reset_to_zero or ()),
                            ("restore_value", restore_value or ())):
            unknown = [n for n in names if n not in self.arg_names]
            if unknown:
                raise ValueError(f"autotune {what} names {unknown} are not parameters of "
                                 f"{self.__name__}{self.jit_fn.signature}")
        prune = dict(prune_configs_by or {})
        extra = set(prune) - {"perf_model", "top_k", "early_config_prune"}
        if extra:
            raise ValueError(f"autotune prune_configs_by: unknown fields {sorted(extra)}")
        self.perf_model = prune.get("perf_model")
        self.configs_top_k = prune.get("top_k", 10)
        self.early_config_prune = prune.get("early_config_prune")
        if spills not in SPILL_RULES:
            raise ValueError(f"autotune spills={spills!r}: expected one of {SPILL_RULES}")
        self.spills = spills
        self.reset_to_zero = list(reset_to_zero or ())
        self.restore_value = list(restore_value or ())
        self.pre_hook = pre_hook or self._reset_arguments
        self.post_hook = post_hook or self._restore_arguments
        self.num_warmups, self.num_reps, self.use_cuda_graph = warmup, rep, use_cuda_graph
        # Tessera's own timer (no do_bench=, warmup=, rep= or use_cuda_graph=) refines close
        # finalists in alternating rounds (_refine); a timer the kernel asked for is used alone.
        self._default_timer = (do_bench is None and warmup is None and rep is None
                               and not use_cuda_graph)
        self._round_timer = _do_bench(2, REFINE_ROUND_MS)
        self._warm_timer = _do_bench(WARM_UP_MS / 2, WARM_UP_MS / 2)
        if do_bench is None:
            do_bench = _benchmarker(warmup, rep, use_cuda_graph)
        self.do_bench = do_bench
        self.cache_results = cache_results
        self.backend = backends.TuningBackend()
        # torch.distributed: tune once for every rank of process_group (None: the world);
        # distributed=None follows TESSERA_AUTOTUNE_DISTRIBUTED (distributed.py).
        self.distributed = distributed
        self.process_group = process_group
        self.best_config_tuned: Optional[Config] = None  # the last tuning's choice
        self._bar: Optional[Progress] = None
        self.cache: Dict[tuple, Config] = {}
        self.best_config: Optional[Config] = None
        self.configs_timings: Dict[Config, float] = {}
        self._said_untimed = False
        self.failed_configs: List[Tuple[Config, str]] = []
        self.bench_time = 0.0        # seconds the last tuning took (as Triton's), of which
        self.compile_time = 0.0      # compiling the configs (all at once, in parallel) and
        self.benchmark_time = 0.0    # timing them on the GPU, one after another
        self.compile_workers = 0     # processes that compiled them
        self._meta_names = {name for c in self.configs for name in c.all_kwargs()}
        self._defaults = {p.name: p.default for p in self.jit_fn.params
                          if p.default is not inspect.Parameter.empty}
        self._restore_copies: Dict[str, Any] = {}
        # The last pass's launch of each timed candidate: {index: (config, call)}, for the
        # refinement rounds that follow it (distributed tuning: after the timings are gathered).
        self._timed: Dict[int, Tuple[Config, Callable[[], None]]] = {}

    # ------------------------------------------------------------------ launching

    def warmup(self, *args, **kwargs) -> list:
        """Compiles every config (after pruning) for these arguments without launching, as
        Triton's ``Autotuner.warmup``; returns the compiled kernels, in the configs' order.
        They compile at once in worker processes (warmup.py); ``compile_time`` and
        ``compile_workers`` say how long and on how many."""
        from .warmup import warmup_configs
        return warmup_configs(self, args, kwargs)

    def __getitem__(self, grid):
        @api_boundary
        def launch(*args, **kwargs):
            # Every keyword of kernel[grid](...) is the kernel's, even one named grid.
            args, kwargs = self.jit_fn._as_run_call(args, kwargs)
            return self.run(*args, grid=grid, **kwargs)
        return launch

    def report(self, *args, **kwargs):
        """The per-kernel report for the config this autotuner picks for these arguments
        (see :func:`tessera.report.report`)."""
        from ..report import report_method
        return report_method(self, *args, **kwargs)

    def _report_choice(self, args, kwargs, grid, measure: bool, arch: str):
        """What tessera.report reports for these arguments: (jit function, kwargs with the
        config's meta-parameters, config dict) of the tuned config (one launch tunes when
        ``measure``), else of the first config that pruning for ``arch`` keeps, untuned."""
        from ..report import static_arch
        if measure:
            self[grid](*args, **kwargs)
            config = self.best_config
        else:
            named = {**self._defaults, **dict(zip(self.arg_names, args)), **kwargs}
            token = static_arch.set(arch)
            try:
                kept = self.prune_configs(kwargs, named)
            finally:
                static_arch.reset(token)
            config = kept[0] if kept else self.configs[0]
        meta = config.all_kwargs()  # type: ignore[union-attr]  # a launch set best_config
        return self.jit_fn, {**kwargs, **meta}, {k: v for k, v in meta.items()
                                                  if k not in ("num_ctas", "maxnreg")}

    @api_boundary
    def run(self, *args, grid, **kwargs):
        named = {**self._defaults, **dict(zip(self.arg_names, args)), **kwargs}
        if kwargs and not self._meta_names.isdisjoint(kwargs):
            clash = sorted(self._meta_names.intersection(kwargs))
            raise ValueError(f"{self.__name__}: conflicting meta-parameters {clash}: they are "
                             f"set by the autotuner's configs; do not pass them")
        key = self._key(named)
        config = self.cache.get(key)
        if config is None:
            config = self._choose(key, _Launch(args, kwargs, named, grid))
            self.cache[key] = config
        self.best_config = config
        meta = config.all_kwargs()
        if config.pre_hook is not None:
            config.pre_hook({**named, **meta})
        if self._bracket_launch and "warmup" not in kwargs:
            # kernel[grid](...): the C++ fast path once this specialization is registered
            # (its own fallback is run(), as here); run() in Python costs about 0.06 ms of
            # host time per launch of an attention kernel's 40 arguments.
            return self.fn[grid](*args, **kwargs, **meta)
        return self.fn.run(*args, grid=grid, **kwargs, **meta)

    def _key(self, named: Dict[str, Any]) -> tuple:
        try:
            values = tuple(named[k] for k in self.keys)
        except KeyError as missing:
            raise TypeError(f"{self.__name__}: autotune key argument {missing} was not given") \
                from None
        return values + tuple(getattr(named.get(n), "dtype", None)
                              for n in self.jit_fn.runtime_names)

    # ------------------------------------------------------------------ choosing

    def _choose(self, key: tuple, launch: _Launch) -> Config:
        mode = (knobs.autotune or "").strip().lower()
        if mode not in _MODES:
            raise ValueError(f"TESSERA_AUTOTUNE={knobs.autotune!r}: use 'force', 'off' or "
                             f"leave it empty")
        if len(self.configs) == 1:
            return self._first(launch)
        if not self.backend.enabled(self.jit_fn):
            return self._untimed(launch)
        values = [launch.named[n] for n in self.jit_fn.runtime_names if n in launch.named]
        values = tuple_arguments.leaf_values(values)  # tuple arguments: their elements
        # TensorDescriptor arguments: their base tensors tell the device.
        values = descriptor_arguments.flatten(["?"] * len(values), values)[1]
        target = self.backend.target(self.jit_fn, values)
        group = distributed.tuning_group(self.distributed, self.process_group)
        if group is not None:  # one decision for every rank of the process group
            return distributed.choose_together(self, group, key, launch, target, mode)
        material, disk_key = self._disk_key(key, target)
        best = self._stored(disk_key, launch, target, mode)
        if best is not None:
            return best
        if mode == "off":
            return self._first(launch)
        start = time.perf_counter()
        candidates = self.prune_configs(launch.kwargs, dict(zip(self.arg_names, launch.args)))
        timings, failures = self._measure(launch, target, candidates,
                                          list(range(len(candidates))),
                                          distributed.key_text(self.__name__, key))
        best = self._conclude(candidates, timings, failures, start)
        self._store(material, disk_key)
        return best

    def _stored(self, disk_key: Optional[str], launch: _Launch, target,
                mode: str) -> Optional[Config]:
        """The best config of the tuning record on disk, loaded for the launch that follows;
        None when there is none, ``force`` ignores it, or it no longer compiles."""
        if disk_key is None or mode == "force":
            return None
        record = results.load(disk_key)
        best = results.best_of(record, self.configs) if record is not None else None
        if best is None:
            return None
        why = self._stored_best_fails(best, launch, target)
        if why is not None:
            # The record outlived what made it valid (a changed toolchain, heuristic or
            # resource limit): a tuning result is an optimisation, so tune again.
            warnings.warn(f"{self.__name__}: the stored tuning result's best config ({best}) "
                          f"no longer compiles ({why}); tuning again", RuntimeWarning,
                          stacklevel=5)
            return None
        self._adopt(best, results.stored_timings(record, self.configs))
        return best

    def _adopt(self, best: Config, timings: Dict[Config, float]) -> None:
        """Takes a decision made elsewhere (a record on disk, or group rank 0's)."""
        self.configs_timings = timings
        self.failed_configs = []
        self.bench_time = self.compile_time = self.benchmark_time = 0.0

    def _store(self, material: Optional[dict], disk_key: Optional[str], ranks: int = 1) -> None:
        """Writes the last tuning's record (best config, every timing and failure)."""
        if disk_key is None or material is None or self.best_config_tuned is None:
            return
        results.store(disk_key, results.make_record(
            material, self.best_config_tuned, self.configs_timings, dict(self.failed_configs),
            self.bench_time, compile_seconds=self.compile_time,
            benchmark_seconds=self.benchmark_time, compile_workers=self.compile_workers,
            ranks=ranks))

    def _untimed(self, launch: _Launch) -> Config:
        """The interpreter's choice: the first config, said once per kernel (CPU timings say
        nothing about a GPU, so tuning there would only cost time)."""
        config = self._first(launch)
        if not self._said_untimed:
            self._said_untimed = True
            sys.stderr.write(f"autotune {self.__name__}: interpreted on the CPU, so the "
                             f"{len(self.configs)} configs are not timed; using the first "
                             f"({config})\n")
            sys.stderr.flush()
        return config
    def _stored_best_fails(self, best: Config, launch: _Launch, target) -> Optional[str]:
        """Why a tuning record's best config cannot be compiled for this launch now (None:
        it compiles, and is loaded for the launch that follows)."""
        try:
            job = self._job(best, launch.args, launch.kwargs, target)
            hash(job.kernel_key)
        except Exception as error:  # noqa: BLE001 - e.g. a heuristic or binding error
            return backends.failure_reason(error)
        outcome = self.backend.verify(job)
        if outcome.failure is not None:
            return outcome.failure
        self.backend.install(job, outcome)
        return None

    def _first(self, launch: _Launch) -> Config:
        """The config used untuned: the first that early pruning keeps for this launch."""
        if self.early_config_prune is None:
            return self.configs[0]
        kept = self.prune_configs(launch.kwargs, dict(zip(self.arg_names, launch.args)))
        return kept[0] if kept else self.configs[0]

    def _disk_key(self, key: tuple, target) -> Tuple[Optional[dict], Optional[str]]:
        if not self.cache_results:
            return None, None
        key_values, dtypes = key[:len(self.keys)], key[len(self.keys):]
        try:
            material = results.key_material(self.jit_fn, key_values, dtypes, target,
                                            self.configs)
        except results.NotPersistable as why:
            _log.info("%s: tuning result kept in memory only (%s)", self.__name__, why)
            return None, None
        if self.spills != "allow":  # another rule may choose another config
            material["spills"] = self.spills
        return material, results.tuning_key(material, self._source())

    def _source(self) -> str:
        """The kernel's source key plus the source of its heuristics (read as the kernel's
        sources are, through the source index: a warm start tokenizes nothing)."""
        from ..frontend import source_index
        from ..frontend.source import function_source
        parts = [self.jit_fn.source_key()]
        for layer in self.heuristics:
            for name, rule in layer.values.items():
                try:
                    text = "".join(function_source(rule)[0])
                    parts.append(f"# heuristic {name}\n{text}")
                except (OSError, TypeError):  # no source (a builtin, a callable object)
                    parts.append(f"# heuristic {name}: {getattr(rule, '__qualname__', rule)}")
        source_index.flush()
        return "\n".join(parts)

    def prune_configs(self, kwargs: Dict[str, Any], nargs: Dict[str, Any]) -> List[Config]:
        """``early_config_prune(configs, nargs, **kwargs)``, then the ``top_k`` configs with
        the lowest ``perf_model(**nargs, **kwargs, **config.all_kwargs())`` (as Triton)."""
        pruned = list(self.configs)
        if self.early_config_prune is not None:
            pruned = list(self.early_config_prune(pruned, nargs, **kwargs))
        if self.perf_model is not None:
            top_k = self.configs_top_k
            if isinstance(top_k, float) and top_k <= 1.0:
                top_k = max(1, int(len(self.configs) * top_k))
            elif not isinstance(top_k, int):
                raise TypeError("prune_configs_by['top_k'] must be an int or a float <= 1.0")
            if len(pruned) > top_k:
                estimates = {c: self.perf_model(**nargs, **kwargs, **c.all_kwargs())
                             for c in pruned}
                pruned = sorted(pruned, key=lambda c: estimates[c])[:top_k]
        return pruned

    # ------------------------------------------------------------------ tuning

    def _job(self, config: Config, args, kwargs, target) -> backends.CompileJob:
        if config.pre_hook is not None:
            # As before its launches: a hook may change what the kernel specializes on (the
            # blocks of descriptor arguments set to the config's tiles, as Triton's attention
            # tutorial does), and Triton compiles after it.
            config.pre_hook({**self._defaults, **dict(zip(self.arg_names, args)), **kwargs,
                             **config.all_kwargs()})
        final = {**kwargs, **config.all_kwargs()}
        for layer in self.heuristics:
            final = layer.apply(args, final)
        launch, final, _ = self.jit_fn._split_launch(final)
        values, constexprs, keys = self.jit_fn._arguments(args, final)
        options = launch.compile_options(target.arch)
        return backends.CompileJob(self.jit_fn, (keys, constexprs, launch),
                                   values, constexprs, self.jit_fn._specialization(keys),
                                   options, target)

    def _measure(self, launch: _Launch, target, candidates: List[Config],
                 indices: Sequence[int], key_text: str,
                 refine_here: bool = True) -> Tuple[Dict[int, float], Dict[int, str]]:
        """Compiles (all at once) and times the candidates at ``indices``:
        ({index: ms}, {index: why it failed}); then refines the close finalists, unless
        ``refine_here`` is False (distributed tuning refines over the group's timings).
        Sets compile_time, compile_workers and benchmark_time."""
        failures: Dict[int, str] = {}
        jobs: List[backends.CompileJob] = []
        job_of: Dict[int, int] = {}
        index_of_key: Dict[tuple, int] = {}
        for index in indices:
            config = candidates[index]
            try:
                job = self._job(config, launch.args, launch.kwargs, target)
                hash(job.kernel_key)
            except Exception as error:  # noqa: BLE001 - e.g. a heuristic or binding error
                failures[index] = backends.failure_reason(error)
                continue
            reason = resources.why_not_fit(resources.Resources(32 * job.options.num_warps),
                                           target.properties)
            if reason is not None:
                failures[index] = f"pruned before compiling: {reason}"
                continue
            if job.kernel_key not in index_of_key:  # configs that compile to one kernel
                index_of_key[job.kernel_key] = len(jobs)
                jobs.append(job)
            job_of[index] = index_of_key[job.kernel_key]
        with self._arguments_kept(launch):  # warm launches may start while others compile
            return self._compile_and_time(launch, candidates, jobs, job_of, failures,
                                          key_text, refine_here)

    def _compile_and_time(self, launch: _Launch, candidates: List[Config],
                          jobs: List[backends.CompileJob], job_of: Dict[int, int],
                          failures: Dict[int, str], key_text: str,
                          refine_here: bool) -> Tuple[Dict[int, float], Dict[int, str]]:
        self._bar = bar = Progress(self.__name__)
        compiled = [0]
        # The config a compiled job is launched with when it warms the GPU: its first.
        config_of_job = {job_index: candidates[index]
                         for index, job_index in sorted(job_of.items(), reverse=True)}
        installed: set = set()
        warmer = self._warmer(launch, installed)

        def on_compiled(job_index, outcome):
            compiled[0] += 1
            bar.update("compiled", compiled[0], len(jobs))
            if warmer is not None:
                warmer.compiled(jobs[job_index], outcome, config_of_job[job_index])

        compile_start = time.perf_counter()
        outcomes = self._compile(jobs, on_compiled, warmer) if jobs else []
        if outcomes and all(o.pruned for o in outcomes):
            # The estimate ruled out every config; it is a model, ptxas is exact: compile them.
            jobs = [dataclasses.replace(job, estimate_first=False) for job in jobs]
            outcomes = self._compile(jobs, on_compiled, warmer)
        self.compile_time = time.perf_counter() - compile_start
        self.compile_workers = len({o.worker for o in outcomes}) if outcomes else 0
        built = []
        for index, job_index in job_of.items():
            outcome = outcomes[job_index]
            if outcome.failure is None:
                built.append((index, candidates[index], jobs[job_index], outcome))
            else:
                prefix = "pruned before compiling: " if outcome.pruned else ""
                failures[index] = prefix + outcome.failure
        if self.spills == "avoid":
            built = _without_spills(built, failures)
        bench_start = time.perf_counter()
        timings = self._bench_all(launch, built, failures, bar, key_text, warmer, installed,
                                  refine_here)
        self.benchmark_time = time.perf_counter() - bench_start
        return timings, failures

    def _warmer(self, launch: _Launch, installed: set) -> Optional[warming.Warmer]:
        """The GPU's warm-up during the compiles (warming.py): with the default timer, and a
        backend whose compile takes on_idle (a replaced backend may not)."""
        if not self._default_timer:
            return None
        try:
            takes_idle = "on_idle" in inspect.signature(self.backend.compile).parameters
        except (TypeError, ValueError):
            takes_idle = False
        if not takes_idle:
            return None
        return warming.Warmer(self.backend, functools.partial(self._kernel_call, launch),
                              installed)

    def _compile(self, jobs, on_compiled, warmer: Optional[warming.Warmer]):
        if warmer is None:
            return self.backend.compile(jobs, on_done=on_compiled)
        return self.backend.compile(jobs, on_done=on_compiled, on_idle=warmer.idle)

    @contextlib.contextmanager
    def _arguments_kept(self, launch: _Launch):
        """Around launches of candidate configs: the ``restore_value`` arguments are saved
        (each launch's post_hook restores them) and, after the last, restored and the
        ``reset_to_zero`` ones zeroed, so that the launch that follows starts from the
        arguments as the caller gave them."""
        named = launch.named
        self._restore_copies = {name: _snapshot(named[name]) for name in self.restore_value}
        try:
            yield
        finally:
            for name, saved in self._restore_copies.items():
                _restore(named[name], saved)
            self._restore_copies = {}
            self._reset_arguments(named)

    def _conclude(self, candidates: List[Config], timings: Dict[int, float],
                  failures: Dict[int, str], start: float) -> Config:
        """The fastest of ``timings`` (ties: the lower candidate index, the rule every rank
        applies, distributed.fastest); records the timings and failures and logs them."""
        self.bench_time = time.perf_counter() - start
        bar = getattr(self, "_bar", None) or Progress(self.__name__)
        self._bar = None
        best_index = distributed.fastest(timings) if timings else None
        if best_index is not None:
            chosen = candidates[best_index]
            bar.close(f"best ({chosen}) {timings[best_index]:.4f} ms of {len(timings)} timed "
                      f"configs in {self.bench_time:.1f}s ({self._time_split()})")
        else:
            bar.close()
        self.configs_timings = {candidates[i]: timings[i] for i in sorted(timings)}
        self.failed_configs = [(candidates[i], failures[i]) for i in sorted(failures)]
        for config, reason in self.failed_configs:
            level = logging.INFO if "pruned" in reason or "resources" in reason else logging.WARNING
            _log.log(level, "%s: config (%s) skipped: %s", self.__name__, config, reason)
        if best_index is None:
            reasons = "\n".join(f"  {c}: {r}" for c, r in self.failed_configs)
            raise RuntimeError(f"{self.__name__}: no config could run:\n{reasons}")
        best = self.best_config_tuned = candidates[best_index]
        _log.info("%s: tuned %d configs in %.2fs (%s); best (%s) %.4f ms", self.__name__,
                  len(candidates), self.bench_time, self._time_split(), best,
                  timings[best_index])
        return best

    def _time_split(self) -> str:
        """Where the last tuning's time went: "compiling 1.2s on 8 processes, timing 0.4s"."""
        workers = self.compile_workers
        return (f"compiling {self.compile_time:.2f}s on {workers} "
                f"process{'es' if workers != 1 else ''}, timing {self.benchmark_time:.2f}s")

    def _bench_all(self, launch: _Launch, built: List[tuple], failures: Dict[int, str],
                   bar: Progress, key_text: str, warmer: Optional[warming.Warmer],
                   installed: set, refine_here: bool) -> Dict[int, float]:
        """Times each (index, config, job, outcome) of ``built``: {index: ms}, perturbed by
        TESSERA_AUTOTUNE_NOISE when set; a config that fails to load or launch goes to
        ``failures``. Then, with ``refine_here``, refines the close finalists (_refine)."""
        timings: Dict[int, float] = {}
        self._timed = {}
        self._warm_up(launch, built, warmer, installed)
        for done, (index, config, job, outcome) in enumerate(built, 1):
            try:
                if id(job) not in installed:
                    installed.add(id(job))
                    self.backend.install(job, outcome)
                call = self._kernel_call(launch, config)
                self._timed[index] = (config, call)
                ms = self.backend.bench(call, config, self.do_bench)
                timings[index] = noise.perturb(ms, key_text, index)
            except Exception as error:  # noqa: BLE001 - a config that cannot launch
                failures[index] = backends.failure_reason(error)
            best = distributed.fastest(timings) if timings else None
            bar.update("timed", done, len(built),
                       f"{timings[best]:.4f} ms ({built_config(built, best)})"
                       if best is not None else None)
        if refine_here:
            self._refine(timings, key_text)
        return timings

    def _warm_up(self, launch: _Launch, built: List[tuple], warmer: Optional[warming.Warmer],
                 installed: set) -> None:
        """Makes sure the GPU has run for about WARM_UP_MS, untimed, when the pass starts.

        The GPU idles while the configs compile (a second or more): its clocks drop, and the
        first launches of a new module pay its lazy load. Timed first, config 0 then reads
        slow: on an H200 the compat suite's 128x128x64 matmul read above 0.32 ms in one
        tuning and 0.21 ms in the next, so a config 50% slower won. The warm-up overlaps the
        compiles where it can (warming.py); here runs what is left of it: nothing when the
        GPU was kept busy long enough up to now, else the rest on the warm config, or, on a
        cold GPU, WARM_UP_MS of the first config as before. Only with the default timer; a
        config that cannot launch is left to the pass, which records why."""
        if not self._default_timer or not built:
            return
        remaining = warmer.remaining_ms() if warmer is not None else WARM_UP_MS
        if remaining < warming.MIN_WARM_MS:
            return
        if warmer is not None and warmer.call is not None and remaining < WARM_UP_MS:
            warmer.run(remaining)
            return
        _, config, job, outcome = built[0]
        try:
            if id(job) not in installed:
                installed.add(id(job))
                self.backend.install(job, outcome)
            self.backend.warm_up(self._kernel_call(launch, config), config,
                                 self._warm_timer)
        except Exception:  # noqa: BLE001 - the pass times (and reports) this config anyway
            pass

    def _refine(self, timings: Dict[int, float], key_text: str) -> None:
        """Times the close finalists of ``timings`` again in alternating rounds and keeps
        those medians (refine.py says why). Only with the default timer (autotune without
        do_bench=, warmup=, rep=, use_cuda_graph=): a kernel given its own timer is timed
        exactly as it asked, as in Triton."""
        if not self._default_timer:
            return
        timings.update(self._refine_rounds(refine.finalists(timings), key_text))

    def _refine_rounds(self, indices: Sequence[int], key_text: str) -> Dict[int, float]:
        """{index: median of its alternating rounds} for candidates of the last pass."""
        if not indices:
            return {}

        def bench(index: int) -> float:
            config, call = self._timed[index]
            return self.backend.bench(call, config, self._round_timer)

        return refine.rounds(indices, bench, key_text)

    def _refine_own(self, launch: _Launch, indices: Sequence[int],
                    key_text: str) -> Dict[int, float]:
        """Distributed tuning's rounds of this rank's finalists, after the pass: the
        arguments are kept as around the pass."""
        start = time.perf_counter()
        try:
            with self._arguments_kept(launch):
                return self._refine_rounds(indices, key_text)
        finally:
            self.benchmark_time += time.perf_counter() - start

    def _kernel_call(self, launch: _Launch, config: Config) -> Callable[[], None]:
        current = {**launch.kwargs, **config.all_kwargs()}
        full = {**launch.named, **current}

        def call() -> None:
            if config.pre_hook is not None:
                config.pre_hook(full)
            self.pre_hook(full)
            try:
                self.fn.run(*launch.args, grid=launch.grid, **current)
            except BaseException as error:
                self.post_hook(full, exception=error)
                raise
            self.post_hook(full, exception=None)

        return call

    def _reset_arguments(self, kwargs: Dict[str, Any]) -> None:
        for name in self.reset_to_zero:
            _zero(kwargs[name])

    def _restore_arguments(self, kwargs: Dict[str, Any], exception=None) -> None:
        for name, saved in self._restore_copies.items():
            _restore(kwargs[name], saved)


def built_config(built: List[tuple], index: int) -> Config:
    """The config of candidate ``index`` among (index, config, job, outcome) tuples."""
    return next(config for i, config, _, _ in built if i == index)


def _do_bench(warmup: float, rep: float) -> Callable:
    """testing.do_bench with these budgets (ms): the warm-up before a pass (_warm_up, its
    result dropped) and each refinement round (_refine_rounds)."""
    from .. import testing
    return functools.partial(testing.do_bench, warmup=warmup, rep=rep)


def _benchmarker(warmup: Optional[float], rep: Optional[float], use_cuda_graph: bool):
    """The timing function of ``autotune(warmup=, rep=, use_cuda_graph=)``: as Triton, these
    (deprecated there) choose do_bench with those budgets, or do_bench_cudagraph; by default
    do_bench with Tessera's shorter budgets (10 ms warmup, 40 ms timed)."""
    from .. import testing
    if warmup is not None or rep is not None or use_cuda_graph:
        warnings.warn("autotune(warmup=, rep=, use_cuda_graph=) are deprecated in Triton; pass "
                      "do_bench= instead", DeprecationWarning, stacklevel=3)
        if use_cuda_graph:
            return functools.partial(testing.do_bench_cudagraph,
                                     rep=rep if rep is not None else 100)
        return functools.partial(testing.do_bench, warmup=warmup if warmup is not None else 25,
                                 rep=rep if rep is not None else 100)
    return functools.partial(testing.do_bench, warmup=10, rep=40)


def autotune(configs: Sequence[Config], key: Sequence[str],
             prune_configs_by: Optional[Dict[str, Any]] = None,
             reset_to_zero: Optional[Sequence[str]] = None,
             restore_value: Optional[Sequence[str]] = None,
             pre_hook: Optional[Callable] = None, post_hook: Optional[Callable] = None,
             do_bench: Optional[Callable] = None, cache_results: bool = True,
             warmup: Optional[float] = None, rep: Optional[float] = None,
             use_cuda_graph: bool = False, *, distributed: Optional[bool] = None,
             process_group: Any = None, spills: str = "allow"):
    """Decorator: tune a @jit kernel over ``configs`` for each value of the ``key`` arguments.

    As ``triton.autotune``; ``cache_results`` (default on, unlike Triton) keeps results on
    disk. ``reset_to_zero``/``restore_value`` name arguments zeroed before each timed launch /
    restored after it, for kernels that accumulate into or update their inputs.
    ``do_bench(fn, quantiles=...)`` times one config; ``warmup``/``rep`` (ms) or
    ``use_cuda_graph`` choose testing.do_bench / do_bench_cudagraph instead (deprecated in
    Triton, with the same meaning).

    Under ``torch.distributed`` (torchrun), every rank of ``process_group`` (default: the
    world) reaches one decision: the configs are split over the ranks, timed on each rank's
    GPU, gathered, the fastest chosen by one rule, and group rank 0 stores it (autotuner/
    distributed.py; docs/distributed.md). All ranks must then launch the same autotuned
    kernels with the same keys in the same order, as for any collective.
    ``distributed=False`` (or TESSERA_AUTOTUNE_DISTRIBUTED=0) tunes each rank alone.

    ``spills="avoid"`` (Tessera's own): a config whose kernel spills registers to local memory
    (ptxas's figures) is not timed when another config compiled without spills; it is listed
    in ``failed_configs`` with its figures. The default ``"allow"`` times all, as Triton does.

    Example::

        @tessera.autotune(configs=[tessera.Config({"BLOCK": 1024}, num_warps=4),
                                   tessera.Config({"BLOCK": 4096}, num_warps=8)],
                          key=["n"])
        @tessera.jit
        def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr): ...

        add_kernel[lambda meta: (tessera.cdiv(n, meta["BLOCK"]),)](x, y, out, n)
    """
    def decorate(fn):
        return Autotuner(fn, configs, key, prune_configs_by, reset_to_zero, restore_value,
                         pre_hook, post_hook, do_bench, cache_results, warmup, rep,
                         use_cuda_graph, distributed=distributed, process_group=process_group,
                         spills=spills)
    return decorate
