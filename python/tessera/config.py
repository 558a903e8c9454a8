"""Every environment knob Tessera reads, declared once, typed (see docs/config.md).

Nothing else in Tessera reads ``os.environ``: modules import :data:`knobs` and read its fields.
Fields are read from the environment each time they are accessed, so a notebook can change a
knob with ``os.environ[...] = ...`` (or assign the attribute) and see the effect on the next call.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Generic, Optional, Tuple, TypeVar

T = TypeVar("T")


_TRUE_TEXTS = ("1", "true", "yes", "on")
_FALSE_TEXTS = ("", "0", "false", "no", "off")


def _parse_bool(text: str) -> bool:
    """1/true/yes/on or 0/false/no/off (any case); anything else is an error, so that a typo
    such as TESSERA_INTERPRET=ture never silently reads as off."""
    value = text.strip().lower()
    if value in _TRUE_TEXTS or value in _FALSE_TEXTS:
        return value in _TRUE_TEXTS
    raise ValueError(f"{text!r} is not a boolean: use one of "
                     f"{', '.join(_TRUE_TEXTS)} or {', '.join(t for t in _FALSE_TEXTS if t)}")


def _parse_auto(text: str) -> str:
    """'auto', 'on' or 'off' (booleans' spellings accepted for on/off)."""
    value = text.strip().lower()
    if value == "auto":
        return value
    try:
        return "on" if _parse_bool(value) else "off"
    except ValueError:
        raise ValueError(f"{text!r}: use auto, on or off") from None


def _parse_noise(text: str) -> Optional[Tuple[float, int]]:
    """'AMPLITUDE[:SEED]' (e.g. '2.0' or '2.0:7'): (amplitude, seed); '0' or 'off': None."""
    value = text.strip().lower()
    if value in _FALSE_TEXTS:
        return None
    amplitude_text, _, seed_text = value.partition(":")
    try:
        amplitude, seed = float(amplitude_text), int(seed_text or "0")
    except ValueError:
        raise ValueError(f"{text!r} is not 'AMPLITUDE[:SEED]' (e.g. '2.0' or '2.0:7')") from None
    if not amplitude >= 0.0:
        raise ValueError(f"{text!r}: the amplitude must be >= 0")
    return (amplitude, seed) if amplitude > 0.0 else None


@dataclass(frozen=True)
class Knob(Generic[T]):
    name: str
    default: T
    parse: Callable[[str], T]
    doc: str
    # A default computed when the knob is read (``default`` is then only its description),
    # from the environment variables named in ``reads``.
    default_factory: Optional[Callable[[], T]] = None
    reads: Tuple[str, ...] = ()

    def get(self) -> T:
        text = os.environ.get(self.name)
        if text is None or text == "":
            return self.default if self.default_factory is None else self.default_factory()
        try:
            return self.parse(text)
        except ValueError as error:
            raise ValueError(f"environment variable {self.name}: {error}") from None


# Reading os.environ costs ~0.7 µs (it encodes the key and decodes the value), too much for the
# launch path; CPython keeps the raw bytes in os.environ._data, and os.environ assignments
# update it, so a lookup there plus a parse cached per raw value is both cheap and current.
_RAW_ENVIRON = getattr(os.environ, "_data", None)


def _default_cache_dir() -> str:
    """$XDG_CACHE_HOME/tessera (the XDG base directory spec ignores relative paths there),
    else ~/.cache/tessera."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    return str(base / "tessera")


KNOBS: dict[str, Knob[Any]] = {
    "cache_dir": Knob("TESSERA_CACHE_DIR", "$XDG_CACHE_HOME/tessera or ~/.cache/tessera", str,
                      "Directory of the on-disk cache (cubins, metadata, tuning results).",
                      default_factory=_default_cache_dir, reads=("XDG_CACHE_HOME", "HOME")),
    "interpret": Knob("TESSERA_INTERPRET", False, _parse_bool,
                      "Run every @jit kernel on the CPU through the tile-IR interpreter."),
    "dump": Knob("TESSERA_DUMP", "", str,
                 "Comma-separated pass names (or 'all') whose output IR is printed to stderr."),
    "ptxas": Knob("TESSERA_PTXAS", "", str,
                  "Path of ptxas; empty means search PATH and CUDA_HOME, else use the driver JIT."),
    "libdevice": Knob("TESSERA_LIBDEVICE", "", str,
                      "Path of libdevice.10.bc (math functions such as erf); empty means "
                      "$CUDA_HOME/nvvm/libdevice, then /usr/local/cuda/nvvm/libdevice."),
    "wgmma": Knob("TESSERA_WGMMA", True, _parse_bool,
                  "Compute dots that fit on wgmma when the target is sm_90a (off: mma.sync "
                  "everywhere, e.g. to compare the two). Read at each launch; part of the "
                  "cache key."),
    "wgmma_overlap": Knob("TESSERA_WGMMA_OVERLAP", True, _parse_bool,
                          "Let a wgmma dot run on the tensor cores while the ops after it that "
                          "do not need its result execute, waiting at its first use (off: wait "
                          "right after each dot, e.g. to compare). Part of the cache key."),
    "wgmma_pipeline": Knob("TESSERA_WGMMA_PIPELINE", True, _parse_bool,
                           "Keep a pipelined loop's wgmma product in flight across iterations "
                           "(cp.async and TMA rings, sm_90a), as Triton's and CUTLASS's "
                           "mainloops: a step's copies wait for the previous product only, "
                           "behind a barrier after the step's product "
                           "(docs/perf/wgmma_across_iterations.md; needs wgmma_overlap). Off: "
                           "every step waits for its product (the tensor cores idle from its "
                           "end to the next step's first product). Part of the cache key."),
    "wgmma_carry_rescaled": Knob("TESSERA_WGMMA_CARRY_RESCALED", True, _parse_bool,
                                 "With wgmma_pipeline: a loop's product that the next step "
                                 "reads otherwise than as a wgmma accumulator (attention's "
                                 "rescale, acc * alpha) also stays in flight across the back "
                                 "edge, retired by the wait before that reader, and the step's "
                                 "copies go after its last product, as Triton's loops do, in "
                                 "loops whose rings have three slots or more (on two the "
                                 "copies would lead the reads by no step). Measured on an "
                                 "H200: Triton's attention tutorial 0.956 -> 1.018 of Triton "
                                 "(docs/perf/triton_parity.md). Part of the cache key."),
    "wgmma_inner_keep": Knob("TESSERA_WGMMA_INNER_KEEP", True, _parse_bool,
                             "With wgmma_pipeline: the bar.sync inside an op that stages "
                             "through shared memory (a layout conversion, a reduction, a TMA "
                             "store) leaves in flight the wgmma products that nothing written "
                             "after it may overlap (membar: inner_wgmma_pending), instead of "
                             "waiting for every product first (analysis/membar.h). Part of "
                             "the cache key."),
    "pingpong": Knob("TESSERA_PINGPONG", False, _parse_bool,
                     "On sm_90a, in 8-warp kernels, the two warpgroups take turns (named "
                     "barriers) at issuing each loop's wgmma products, so that one's "
                     "softmax runs while the other's products hold the tensor cores "
                     "(FlashAttention-3's ping-pong; docs/perf/attention_tma.md, "
                     "\"Ping-pong\"). Off by default: not measured faster yet. Part of the "
                     "cache key."),
    "carried_addresses": Knob("TESSERA_CARRIED_ADDRESSES", True, _parse_bool,
                              "On sm_90a, codegen without LLVM's loop strength reduction: "
                              "each thread's loop-carried pointers (a pipelined cp.async "
                              "copy's addresses, one per register of a pointer tile) stay "
                              "64-bit values advanced by the step's increment, as in Triton's "
                              "SASS; off: one base per tile plus invariant offsets that ptxas "
                              "recomputes (IMAD.WIDE) before each copy "
                              "(docs/perf/triton_parity.md, matmul_autotune: 0.92x -> 1.01x "
                              "of Triton on an H200). A kernel that spills this way is "
                              "generated the strength-reduced way too and the one that spills "
                              "less kept (a ragged-K 128x128x64 4-warp matmul spilled 432 B "
                              "carried, none reduced). Part of the cache key."),
    "tma": Knob("TESSERA_TMA", True, _parse_bool,
                "The Hopper path for tensor descriptors (sm_90a only), on by default as in "
                "Triton: host TensorDescriptor arguments also pass a CUtensorMap, device-side "
                "tl.make_tensor_descriptor values encode one in global scratch "
                "(tessera.set_allocator), and the pipeliner copies their tiles with TMA "
                "(cp.async.bulk.tensor) into mbarrier-tracked rings (docs/perf/hopper.md). "
                "Off: descriptor tiles are copied with cp.async. Read at each launch; part "
                "of the cache key."),
    "tma_store": Knob("TESSERA_TMA_STORE", False, _parse_bool,
                      "With TESSERA_TMA on sm_90a, a 2-D host TensorDescriptor's store "
                      "(desc.store, the matmul epilogue's c_desc.store) is staged in shared "
                      "memory in the tensor map's swizzle and copied out by the TMA "
                      "(cp.async.bulk.tensor ... global.shared::cta), which clips the box at "
                      "the tensor's bounds; other stores (and columns not proven multiples of "
                      "16 elements: the TMA writes whole 16-byte chunks) keep the masked "
                      "pointer store (docs/perf/hopper.md, \"TMA stores\"). Off by default: "
                      "not measured faster. Read at each launch; part of the cache key."),
    "tma_reduce": Knob("TESSERA_TMA_REDUCE", True, _parse_bool,
                       "With TESSERA_TMA on sm_90a, a 2-D tensor descriptor's reduction "
                       "(desc.atomic_add, atomic_min/max/and/or/xor) is staged in shared "
                       "memory in the tensor map's swizzle and applied by one TMA reduction "
                       "(cp.reduce.async.bulk.tensor ... global.shared::cta), which clips the "
                       "box at the tensor's bounds; other reductions (and columns not proven "
                       "multiples of 16 bytes: the TMA writes whole 16-byte chunks) keep the "
                       "masked pointer atomic (docs/perf/hopper.md, \"TMA reductions\"). On by "
                       "default: one bulk reduction per tile instead of an atomic per element. "
                       "Read at each launch; part of the cache key."),
    "attention_tma": Knob("TESSERA_ATTENTION_TMA", "auto", _parse_auto,
                          "tessera.ops' attention reads its tiles by TMA where the inputs "
                          "allow it (sm_90a, TESSERA_TMA, 16-bit, aligned rows): the forward "
                          "through (B, H, S, D) host tensor descriptors, the backward through "
                          "per-head device descriptors, the masked forward and dQ (ops."
                          "attention_masked) K and V through host descriptors; auto, where it "
                          "measured faster than the cp.async path (configs."
                          "TMA_FASTER_HEAD_DIMS per pass; docs/perf/attention_tma.md); "
                          "on, wherever the inputs allow it; off, never. Read at each call."),
    "matmul_tma": Knob("TESSERA_MATMUL_TMA", "auto", _parse_auto,
                       "tessera.ops.matmul's persistent TMA kernel, where the inputs allow it "
                       "(sm_90a, TESSERA_TMA, fp16/bf16, 16-byte-aligned rows; "
                       "docs/perf/matmul_ops_tma.md): auto, its configs tuned beside the "
                       "pointer kernel's; on, its configs alone; off, never. Read at each "
                       "call (part of the tuning key)."),
    "warp_specialize": Knob("TESSERA_WARP_SPECIALIZE", False, _parse_bool,
                            "With TESSERA_TMA on sm_90a: every TMA-pipelined loop that can "
                            "be gets a producer warpgroup that issues its copies while the "
                            "kernel's warps compute (tl.range(warp_specialize=True) asks for "
                            "one loop); ineligible loops keep the plain TMA pipeline "
                            "(docs/perf/warp_specialization.md). Read at each launch; part of "
                            "the cache key."),
    "always_compile": Knob("TESSERA_ALWAYS_COMPILE", False, _parse_bool,
                           "Ignore the on-disk cache and compile every kernel again."),
    "prewarm": Knob("TESSERA_PREWARM", False, _parse_bool,
                    "On `import tessera`, import the compiler and hash its sources on a "
                    "background thread, so that the first compile or launch does not wait "
                    "for them (runtime/prewarm.py; writes nothing). Off by default: a "
                    "program's own thread importing Tessera's modules at the same time could "
                    "meet a cycle of imports half done (CPython then hands one side a "
                    "partially initialized module). Off: the first launch does it."),
    "autotune": Knob("TESSERA_AUTOTUNE", "", str,
                     "'force' tunes again (once per key and process, ignoring results on disk), "
                     "'off' uses the result on disk or the first config; empty = default."),
    "autotune_distributed": Knob("TESSERA_AUTOTUNE_DISTRIBUTED", True, _parse_bool,
                                 "When torch.distributed is initialized, every rank of the "
                                 "process group reaches one tuning decision: the configs are "
                                 "split over the ranks, timed, gathered, and rank 0 stores "
                                 "the result (autotuner/distributed.py). Off: each rank tunes "
                                 "alone (also autotune(distributed=False))."),
    "autotune_sync_timeout": Knob("TESSERA_AUTOTUNE_SYNC_TIMEOUT", 600.0, float,
                                  "Seconds a rank waits for the other ranks of its group to "
                                  "reach the same tuning (same kernel and key) before raising "
                                  "an error that names them, instead of hanging."),
    "autotune_noise": Knob("TESSERA_AUTOTUNE_NOISE", None, _parse_noise,
                           "Testing aid: 'AMPLITUDE[:SEED]' multiplies every measured config "
                           "time by a factor in [1, 1 + AMPLITUDE), seeded per rank, kernel, "
                           "key and config (shows ranks disagreeing without the distributed "
                           "tuning); unset: off."),
    "autotune_progress": Knob("TESSERA_AUTOTUNE_PROGRESS", None, _parse_bool,
                              "Show the autotuner's progress bar on stderr (unset: only when "
                              "stderr is a terminal)."),
    "interpret_progress": Knob("TESSERA_INTERPRET_PROGRESS", None, _parse_bool,
                               "Show a progress line on stderr for interpreted launches that "
                               "run over 2 seconds (unset: only when stderr is a terminal or "
                               "a Jupyter kernel's stream)."),
    "full_traceback": Knob("TESSERA_FULL_TRACEBACK", False, _parse_bool,
                           "Keep Tessera's internal frames and chained exceptions in the "
                           "tracebacks of kernel errors (off: the caller's frames and the "
                           "message only), to debug Tessera itself."),
    "debug": Knob("TESSERA_DEBUG", False, _parse_bool,
                  "Compile tl.device_assert and `assert` statements into kernels (as "
                  "TRITON_DEBUG; also @jit(debug=True)), and check the int32 arithmetic of "
                  "pointer offsets for overflow; off, they build nothing. Read at each launch; "
                  "part of the cache key."),
}

# The remote kernel cache (store/remote_cache.py; Triton's TRITON_REMOTE_CACHE_BACKEND and
# TRITON_REDIS_*).
KNOBS.update({
    "remote_cache_backend": Knob("TESSERA_REMOTE_CACHE_BACKEND", "", str,
                                 "'module:Class' of a RemoteCacheBackend that kernel cache "
                                 "entries are also read from and written to; empty: none."),
    "redis_host": Knob("TESSERA_REDIS_HOST", "localhost", str,
                       "Host of the Redis server of RedisRemoteCacheBackend."),
    "redis_port": Knob("TESSERA_REDIS_PORT", 6379, int,
                       "Port of the Redis server of RedisRemoteCacheBackend."),
    "redis_key_format": Knob("TESSERA_REDIS_KEY_FORMAT", "tessera:{key}:{filename}", str,
                             "Redis key of one cached file ({key}, {filename} filled in)."),
})


_ENCODED: dict = {}


def _encoded(name: str) -> bytes:
    data = _ENCODED.get(name)
    if data is None:
        data = _ENCODED[name] = os.fsencode(name)
    return data


class _Knobs:
    """Attribute access to the current value of every knob: ``knobs.cache_dir``.

    Each knob is a property (plain attribute lookup, no __getattr__ fallback) because the
    launch path reads ``interpret`` on every call.
    """

    _overrides: dict[str, Any]
    _parsed: dict[str, Any]
    if TYPE_CHECKING:  # the knobs: properties installed from KNOBS below
        def __getattr__(self, key: str) -> Any: ...

    def __init__(self) -> None:
        object.__setattr__(self, "_overrides", {})
        object.__setattr__(self, "_parsed", {})  # knob -> (raw environment bytes, value)

    def _value(self, key: str):
        if key in self._overrides:
            return self._overrides[key]
        knob = KNOBS[key]
        if _RAW_ENVIRON is None:
            return knob.get()
        raw = _RAW_ENVIRON.get(_encoded(knob.name))
        if knob.reads:  # a default computed from other variables: they are part of the key
            raw = (raw, *(_RAW_ENVIRON.get(_encoded(name)) for name in knob.reads))
        parsed = self._parsed.get(key)
        if parsed is None or parsed[0] != raw:
            parsed = (raw, knob.get())
            self._parsed[key] = parsed
        return parsed[1]

    def __setattr__(self, key: str, value) -> None:
        if key not in KNOBS:
            raise AttributeError(f"tessera.config has no knob '{key}'")
        self._overrides[key] = value

    def __repr__(self) -> str:
        """Every knob's value and where it comes from, one a line: the environment variable,
        a programmatic override, or the default."""
        lines = []
        for key, knob in KNOBS.items():
            if key in self._overrides:
                origin = "set in Python"
            elif os.environ.get(knob.name) is not None:
                origin = f"from ${knob.name}"
            else:
                origin = f"default; ${knob.name}"
            lines.append(f"  {key}={self._value(key)!r},  # {origin}")
        return "tessera knobs(\n" + "\n".join(lines) + "\n)"

    def reset(self, key: Optional[str] = None) -> None:
        """Forget programmatic overrides (all, or one knob) and read the environment again."""
        if key is None:
            self._overrides.clear()
        else:
            self._overrides.pop(key, None)

    @contextlib.contextmanager
    def scope(self, **values):
        """Overrides the given knobs inside a ``with`` block, then restores what was there
        before (an earlier override, or the environment): ``with knobs.scope(interpret=True):``."""
        for key in values:
            if key not in KNOBS:
                raise AttributeError(f"tessera.config has no knob '{key}'")
        missing = object()
        saved = {key: self._overrides.get(key, missing) for key in values}
        self._overrides.update(values)
        try:
            yield self
        finally:
            for key, value in saved.items():
                if value is missing:
                    self._overrides.pop(key, None)
                else:
                    self._overrides[key] = value


def _knob_property(key: str) -> property:
    return property(lambda self: self._value(key), doc=KNOBS[key].doc)


for _key in KNOBS:
    setattr(_Knobs, _key, _knob_property(_key))

knobs = _Knobs()
