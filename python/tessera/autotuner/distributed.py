"""One tuning decision for every rank of a ``torch.distributed`` process group.

Tuned alone, each rank of a training job times every config on its own GPU: timing noise can
make ranks pick different configs (different numerics per rank), every rank spends the whole
tuning time, and all of them write the same cache entries. When torch.distributed is
initialized, an autotuned kernel's tuning is instead one step of the group (by default the
world; ``autotune(process_group=...)`` picks another, ``autotune(distributed=False)`` or
TESSERA_AUTOTUNE_DISTRIBUTED=0 opts out). For one tuning key, every rank of the group:

1. meets the others (:func:`meet`): posts (kernel, key, candidate configs, device, mode) to
   the group's store and waits for theirs, at most TESSERA_AUTOTUNE_SYNC_TIMEOUT seconds; a
   rank that tunes another kernel or key, or never comes, is an error naming both, not a hang.
   Group rank 0 posts its stored tuning result too, if it has one: then every rank takes it.
2. compiles and times its share: candidate i belongs to rank i % world size;
3. gathers every rank's timings and failures (``all_gather_object`` on the group's backend);
4. with the default timer, refines over the group (:func:`refine_together`): the finalists
   are picked from the gathered timings by one rule (refine.finalists), each rank times the
   finalists of its own share again in alternating rounds, and those medians are gathered;
5. chooses the fastest, ties to the lowest candidate index (:func:`fastest`): the same rule on
   the same numbers, so the same config on every rank;
6. group rank 0 alone writes the tuning record.

As for any collective, all ranks of the group must launch the same autotuned kernels with the
same tuning keys in the same order (SPMD training does). Without torch imported, or without an
initialized process group, nothing here runs: the tuner tunes alone, as before.
"""
from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from ..config import knobs
from . import backend as backends, refine, results
from .ranks import fastest, global_rank, torch_distributed as _dist  # noqa: F401 (public here)


class AutotuneSyncError(RuntimeError):
    """The ranks of a group did not reach the same tuning: another kernel or key, or none."""


@dataclass(frozen=True)
class Group:
    """The process group that tunes together, as this rank sees it."""
    handle: Any           # the torch.distributed ProcessGroup
    rank: int             # this rank's index in the group
    size: int
    name: str             # a short digest of the group's global ranks (store key prefix)


def tuning_group(distributed: Optional[bool], process_group: Any) -> Optional[Group]:
    """The group that tunes together, or None to tune alone: opted out (``distributed`` False,
    or None with the knob off), no initialized process group, a group of one rank, or a group
    this rank is not in."""
    if distributed is False or (distributed is None and not knobs.autotune_distributed):
        return None
    dist = _dist()
    if dist is None:
        return None
    handle = process_group if process_group is not None else dist.group.WORLD
    size = dist.get_world_size(handle)
    rank = dist.get_rank(handle)
    if size <= 1 or rank < 0:
        return None
    ranks = ",".join(str(r) for r in dist.get_process_group_ranks(handle))
    return Group(handle, rank, size, hashlib.sha256(ranks.encode()).hexdigest()[:16])


def share(count: int, group: Group) -> List[int]:
    """The candidate indices this rank compiles and times: i % size == rank (round robin, so
    that configs listed from small to large spread evenly)."""
    return [i for i in range(count) if i % group.size == group.rank]


def key_text(kernel: str, key: tuple) -> str:
    """A stable text of a tuning key (dtypes and values; tensors by shape and dtype), the
    same in every process: what ranks compare, and what seeds the timing noise."""
    parts = []
    for value in key:
        try:
            parts.append(results.canonical_value(value))
        except results.NotPersistable:
            parts.append(repr(value) if not hasattr(value, "dtype") else str(value.dtype))
    return f"{kernel}{json.dumps(parts, default=str, sort_keys=True)}"


# The number of meetings each group has had in this process: all ranks count the same, so
# the n-th meeting of every rank uses the same store keys.
_MEETINGS: Dict[str, int] = {}


def _store():
    """The default group's key-value store (TCPStore under torchrun), or None when this
    torch does not expose it: the meeting then goes through all_gather_object, without its
    own timeout (the group's timeout applies)."""
    try:
        from torch.distributed import distributed_c10d
        return distributed_c10d._get_default_store()
    except Exception:  # noqa: BLE001 - a private API: any failure means "not available"
        return None


def _differences(mine: Dict[str, Any], theirs: Dict[str, Any]) -> List[str]:
    return [field for field in ("kernel", "key", "configs", "device", "mode")
            if mine.get(field) != theirs.get(field)]


def _check(group: Group, headers: List[Dict[str, Any]]) -> None:
    mine = headers[group.rank]
    for rank, theirs in enumerate(headers):
        fields = _differences(mine, theirs)
        if fields:
            detail = "; ".join(f"{f}: rank {group.rank} has {mine.get(f)!r}, rank {rank} has "
                               f"{theirs.get(f)!r}" for f in fields)
            raise AutotuneSyncError(
                f"autotune {mine['kernel']}: the ranks of the process group are not tuning the "
                f"same thing ({detail}). Every rank must launch the same autotuned kernels with "
                f"the same tuning keys in the same order, as for any collective; or tune per "
                f"rank with autotune(distributed=False) / TESSERA_AUTOTUNE_DISTRIBUTED=0")


def meet(group: Group, header: Dict[str, Any], device: int = -1) -> List[Dict[str, Any]]:
    """Every rank's header (by group rank), after checking that all of them tune the same
    kernel, key and candidates; raises :class:`AutotuneSyncError` otherwise, or when a rank
    does not come within TESSERA_AUTOTUNE_SYNC_TIMEOUT seconds."""
    store = _store()
    if store is None:
        headers = gather(group, header, device)
        _check(group, headers)
        return headers
    count = _MEETINGS.get(group.name, 0)
    _MEETINGS[group.name] = count + 1
    prefix = f"tessera/autotune/{group.name}/{count}/"
    keys = [f"{prefix}{rank}" for rank in range(group.size)]
    store.set(keys[group.rank], json.dumps(header))
    timeout = float(knobs.autotune_sync_timeout)
    try:
        store.wait(keys, datetime.timedelta(seconds=timeout))
    except Exception as error:  # noqa: BLE001 - DistStoreError (timeout) or a closed store
        missing = [rank for rank, key in enumerate(keys) if not _present(store, key)]
        if not missing:
            raise
        raise AutotuneSyncError(
            f"autotune {header['kernel']}: group rank(s) {missing} did not reach this tuning "
            f"(key {header['key']}) within {timeout:g} s (TESSERA_AUTOTUNE_SYNC_TIMEOUT). "
            f"Every rank must launch the same autotuned kernels with the same tuning keys in "
            f"the same order, as for any collective; or tune per rank with "
            f"autotune(distributed=False) / TESSERA_AUTOTUNE_DISTRIBUTED=0") from error
    headers = [json.loads(store.get(key)) for key in keys]
    _check(group, headers)
    return headers


def _present(store, key: str) -> bool:
    try:
        return bool(store.check([key]))
    except Exception:  # noqa: BLE001
        return False


def gather(group: Group, payload: Any, device: int = -1) -> List[Any]:
    """Every rank's ``payload`` (picklable), by group rank: ``all_gather_object`` on the
    group's own backend. Under NCCL its buffers go to the current CUDA device, so the tuning
    GPU is made current around it (ranks sharing one device would otherwise collide)."""
    dist = _dist()
    assert dist is not None, "gather needs an initialized process group"
    gathered: List[Any] = [None] * group.size
    context: Any = contextlib.nullcontext()
    if device >= 0 and "nccl" in str(dist.get_backend(group.handle)).lower():
        import torch
        context = torch.cuda.device(device)
    with context:
        dist.all_gather_object(gathered, payload, group=group.handle)
    return gathered


def merge(group: Group, shares: Sequence[Dict[str, Any]]) -> tuple:
    """({index: ms}, {index: reason}) of every rank's share; raises, on every rank alike,
    when a rank failed outside a config (its error is in its share)."""
    timings: Dict[int, float] = {}
    failures: Dict[int, str] = {}
    for rank, part in enumerate(shares):
        if part.get("error"):
            raise RuntimeError(f"autotune: group rank {rank} failed while tuning its share of "
                               f"the configs: {part['error']}")
        timings.update({int(i): float(ms) for i, ms in part["timings"].items()})
        failures.update({int(i): str(why) for i, why in part["failures"].items()})
    return timings, failures


def _configs_digest(candidates: Sequence[Any]) -> str:
    text = "\n".join(str(config) for config in candidates)
    return f"{len(candidates)} configs {hashlib.sha256(text.encode()).hexdigest()[:12]}"


def choose_together(tuner, group: Group, key: tuple, launch, target, mode: str):
    """The config of ``key`` for every rank of ``group`` (steps 1-5 of the module docstring);
    ``tuner`` is the Autotuner, ``launch`` its _Launch, ``target`` this rank's GPU."""


    text = key_text(tuner.__name__, key)
    candidates = tuner.prune_configs(launch.kwargs, dict(zip(tuner.arg_names, launch.args)))
    header: Dict[str, Any] = {"kernel": tuner.__name__, "key": text,
                              "configs": _configs_digest(candidates),
                              "device": f"{target.name} {target.arch}", "mode": mode,
                              "stored": None}
    material = disk_key = None
    if group.rank == 0:  # the group's one reader and writer of the tuning record
        material, disk_key = tuner._disk_key(key, target)
        stored = tuner._stored(disk_key, launch, target, mode)
        if stored is not None:
            header["stored"] = {"best": stored.to_json(), "timings_ms": [
                [c.to_json(), ms] for c, ms in tuner.configs_timings.items()]}
    headers = meet(group, header, target.device)
    stored_record = headers[0]["stored"]
    if stored_record is not None:
        best = results.best_of(stored_record, tuner.configs)
        if best is None:  # rank 0 built it from these very forms: a bug, not a user error
            raise AutotuneSyncError(f"autotune {tuner.__name__}: group rank 0's stored "
                                    f"config {stored_record['best']} is not a config")
        tuner._adopt(best, results.stored_timings(stored_record, tuner.configs))
        return best
    if mode == "off":
        return tuner._first(launch)
    start = time.perf_counter()
    try:
        timings, failures = tuner._measure(launch, target, candidates,
                                           share(len(candidates), group), text,
                                           refine_here=False)
        part: Dict[str, Any] = {"timings": timings, "failures": failures}
    except Exception as error:  # noqa: BLE001 - the other ranks must hear of it, not hang
        part = {"error": backends.failure_reason(error)}
    timings, failures = merge(group, gather(group, part, target.device))
    if tuner._default_timer:
        timings = refine_together(tuner, group, launch, timings, text, target.device)
    best = tuner._conclude(candidates, timings, failures, start)
    if group.rank == 0:
        tuner._store(material, disk_key, ranks=group.size)
    return best


def refine_together(tuner, group: Group, launch, timings: Dict[int, float], text: str,
                    device: int = -1) -> Dict[int, float]:
    """The group's timings with the close finalists timed again (refine.py says why).

    The finalists come from the gathered timings by refine.finalists, a pure function of
    them, so every rank picks the same ones. Each rank times again, in alternating rounds,
    only the finalists of its own share (a rank owning one times it alone, so that every
    finalist's figure is a median of rounds), on its own GPU; then one more gather. A rank
    owns about REFINE_FINALISTS / size finalists, instead of refining up to REFINE_FINALISTS
    of its own share as a rank tuning alone does.

    Across ranks, the medians compare as the pass's timings already do: each from its own
    GPU, all GPUs of one kind (meet checks the device name). The rounds cancel clock drift
    within a GPU; a steady speed difference between two GPUs is not cancelled (that would
    take timing a shared reference config on every rank: one more config per rank's
    rounds); on identical GPUs of one host it is of the order of the noise the rounds leave.
    A rank may idle at the gather while a slower rank finishes its pass; the median of its
    rounds absorbs a first round slowed by that.
    """

    finalists = refine.finalists(timings)
    if not finalists:  # decided from the gathered timings: every rank skips alike
        return timings
    mine = [index for index in finalists if index % group.size == group.rank]
    try:
        part: Dict[str, Any] = {"timings": tuner._refine_own(launch, mine, text),
                                "failures": {}}
    except Exception as error:  # noqa: BLE001 - the other ranks must hear of it, not hang
        part = {"error": backends.failure_reason(error)}
    refined, _ = merge(group, gather(group, part, device))
    return {**timings, **refined}
