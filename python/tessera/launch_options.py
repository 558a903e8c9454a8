"""Launch options of ``kernel[grid](..., num_warps=4, maxnreg=128, ...)`` and the @jit options
that decide how arguments are specialized, with Triton's meaning.

A launch keyword that is a launch option (``num_warps``, ``num_stages``, ``num_ctas``,
``maxnreg``, ``enable_fp_fusion``, ``debug``) goes to the compiler; when the kernel also has a
parameter of that name, the value goes to both (as Triton). Options that change the generated
code are part of the kernel's cache key (:class:`LaunchOptions` is hashable).

Example::

    kernel[grid](x, y, n, BLOCK=1024, num_warps=8, maxnreg=128, enable_fp_fusion=False)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, Optional, Sequence, Tuple

from .config import knobs

# The options JITFunction.run takes (the C++ fast path knows the same names, in this order
# after num_warps and num_stages: cpp/bindings/launch_dispatcher.h).
OPTION_NAMES = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "debug")
FAST_PATH_OPTIONS = ("num_ctas", "maxnreg", "enable_fp_fusion", "debug")

# The knobs read at each launch that change the generated code: their values are fields of
# LaunchOptions (so of the in-memory kernel key), and the C++ fast path watches them (jit.py
# hands it this table), so flipping one, e.g. ``with knobs.scope(tma=True):``, never launches
# the kernel compiled the other way.
CODE_KNOBS = ("debug", "tma", "warp_specialize", "wgmma", "wgmma_overlap", "wgmma_pipeline",
              "carried_addresses", "tma_store", "tma_reduce", "pingpong",
              "wgmma_carry_rescaled", "wgmma_inner_keep")

# Triton launch options Tessera accepts only at Triton's default value (anything else is a
# feature Tessera lacks: an error that says so, not a silently different kernel).
_DEFAULT_ONLY = {"launch_cooperative_grid": False, "launch_pdl": False, "warp_size": 32,
                 "extern_libs": None, "sanitize_overflow": True, "instrumentation_mode": ""}


# Triton launch options that the interpreter honours by doing nothing and GPU launches refuse.
# A cooperative grid (launch_cooperative_grid=True) guarantees that every program of the grid
# is resident at once, so programs may wait on each other through global memory; the
# interpreter runs the programs one after another, which a kernel written for a cooperative
# grid does not rely on otherwise (Triton's interpreter also takes the option and ignores it).
_INTERPRETER_ONLY = ("launch_cooperative_grid",)


@dataclass(frozen=True)
class LaunchOptions:
    """What a launch asks of the compiler, normalized (part of the in-memory kernel key)."""
    num_warps: int = 4
    num_stages: int = 1
    maxnreg: Optional[int] = None
    enable_fp_fusion: bool = True
    debug: bool = False
    # TESSERA_TMA when the launch is made: it changes the kernel's parameters (tensor maps),
    # so a launch with the knob flipped must not find the kernel compiled the other way.
    # The defaults here are the knobs' defaults.
    tma: bool = True
    # TESSERA_WARP_SPECIALIZE when the launch is made (a producer warpgroup: another block).
    warp_specialize: bool = False
    # TESSERA_WGMMA, _OVERLAP and _PIPELINE when the launch is made (their defaults here).
    wgmma: bool = True
    wgmma_overlap: bool = True
    wgmma_pipeline: bool = True
    # TESSERA_CARRIED_ADDRESSES when the launch is made (on by default).
    carried_addresses: bool = True
    # TESSERA_TMA_STORE when the launch is made (off by default).
    tma_store: bool = False
    # TESSERA_TMA_REDUCE when the launch is made (on by default).
    tma_reduce: bool = True
    # TESSERA_PINGPONG when the launch is made (off by default).
    pingpong: bool = False
    # TESSERA_WGMMA_CARRY_RESCALED when the launch is made (on by default).
    wgmma_carry_rescaled: bool = True
    # TESSERA_WGMMA_INNER_KEEP when the launch is made (on by default).
    wgmma_inner_keep: bool = True

    def compile_options(self, arch: str):
        """The CompileOptions of this launch for ``arch``."""
        from .compiler import CompileOptions
        return CompileOptions(num_warps=self.num_warps, num_stages=self.num_stages, arch=arch,
                              maxnreg=self.maxnreg, enable_fp_fusion=self.enable_fp_fusion,
                              debug=self.debug, tma=self.tma, wgmma=self.wgmma,
                              wgmma_overlap=self.wgmma_overlap,
                              wgmma_pipeline=self.wgmma_pipeline,
                              carried_addresses=self.carried_addresses,
                              tma_store=self.tma_store, tma_reduce=self.tma_reduce,
                              warp_specialize=self.warp_specialize, pingpong=self.pingpong,
                              wgmma_carry_rescaled=self.wgmma_carry_rescaled,
                              wgmma_inner_keep=self.wgmma_inner_keep)


def _check_int(kernel: str, name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{kernel}: launch option {name}={value!r}: expected an int in "
                         f"[{low}, {high}]")
    return value


def parse_options(kernel: str, given: Dict[str, Any], jit_debug: Optional[bool]) -> LaunchOptions:
    """Normalizes and checks the launch options of one call (``given``: name -> value as the
    call passed them). ``jit_debug``: @jit(debug=...); the TESSERA_DEBUG knob fills in."""
    num_warps = given.get("num_warps", 4)
    if isinstance(num_warps, bool) or not isinstance(num_warps, int) or num_warps < 1 or \
            num_warps & (num_warps - 1) or num_warps > 32:
        raise ValueError(f"{kernel}: launch option num_warps={num_warps!r}: must be a power of "
                         "two from 1 to 32 (a program has at most 1024 threads)")
    # 0 and 1 both mean "no software pipelining" (as Triton's pipeliner): one kernel.
    num_stages = max(1, _check_int(kernel, "num_stages", given.get("num_stages", 1), 0, 64))
    num_ctas = given.get("num_ctas", 1)
    if num_ctas != 1 or isinstance(num_ctas, bool):
        raise ValueError(f"{kernel}: num_ctas={num_ctas!r}: thread-block clusters (num_ctas > 1) "
                         "are not supported by Tessera yet; launch with num_ctas=1")
    maxnreg = given.get("maxnreg")
    if maxnreg is not None:
        maxnreg = _check_int(kernel, "maxnreg", maxnreg, 1, 255)  # PTX .maxnreg's range
    fusion = given.get("enable_fp_fusion")
    debug = given.get("debug")
    if debug is None:
        debug = jit_debug
    return LaunchOptions(num_warps, num_stages, maxnreg,
                         True if fusion is None else bool(fusion),
                         bool(debug) or bool(knobs.debug), bool(knobs.tma),
                         bool(knobs.warp_specialize), bool(knobs.wgmma),
                         bool(knobs.wgmma_overlap), bool(knobs.wgmma_pipeline),
                         bool(knobs.carried_addresses), bool(knobs.tma_store),
                         bool(knobs.tma_reduce), bool(knobs.pingpong),
                         bool(knobs.wgmma_carry_rescaled), bool(knobs.wgmma_inner_keep))


def split_launch_kwargs(kernel: str, parameter_names: Iterable[str], kwargs: Dict[str, Any],
                        interpreting: bool = False) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(launch options given, keyword arguments for the kernel's parameters). A name that is
    both goes to both; Triton-only options at their default value are dropped, and so are
    the interpreter-only ones when ``interpreting`` (a GPU launch refuses them)."""
    options: Dict[str, Any] = {}
    rest: Dict[str, Any] = {}
    names = parameter_names if isinstance(parameter_names, (set, frozenset)) \
        else set(parameter_names)
    for key, value in kwargs.items():
        if key in OPTION_NAMES:
            options[key] = value
            if key in names:
                rest[key] = value
        elif key in _INTERPRETER_ONLY and key not in names:
            if value != _DEFAULT_ONLY[key] and not interpreting:
                raise ValueError(f"{kernel}: launch option {key}={value!r}: a cooperative "
                                 f"grid launch is not supported by Tessera on the GPU yet (the "
                                 f"interpreter accepts it); launch with {key}=False")
        elif key in _DEFAULT_ONLY and key not in names:
            if value != _DEFAULT_ONLY[key]:
                raise ValueError(f"{kernel}: launch option {key}={value!r} is a Triton option "
                                 f"that Tessera does not support yet (only "
                                 f"{key}={_DEFAULT_ONLY[key]!r})")
        else:
            rest[key] = value
    return options, rest


def fast_path_options(options: Dict[str, Any]) -> tuple:
    """The options besides num_warps/num_stages as the call gave them, for the C++ launch table
    (None where absent; () when none was given)."""
    if not any(name in options for name in FAST_PATH_OPTIONS):
        return ()
    return tuple(options.get(name) for name in FAST_PATH_OPTIONS)


# ------------------------------------------------------------------- do_not_specialize flags
# Bit values as runtime::python::SpecializeFlags (cpp/bindings/python_specialize.h).
NO_DIVISIBILITY = 1
NO_EQUAL_TO_ONE = 2


def specialize_flags(parameter_names: Sequence[str], do_not_specialize: Iterable,
                     do_not_specialize_on_alignment: Iterable) -> Tuple[int, ...]:
    """Per parameter (by position), what its key leaves out: a do_not_specialize parameter
    (named or by index) is never specialized on divisibility nor on == 1; one in
    do_not_specialize_on_alignment only not on divisibility (as Triton)."""
    flags = [0] * len(parameter_names)
    # As Triton, entries that name no parameter are ignored (a kernel that runs on Triton must
    # run here unchanged).
    for group, bits in ((do_not_specialize, NO_DIVISIBILITY | NO_EQUAL_TO_ONE),
                        (do_not_specialize_on_alignment, NO_DIVISIBILITY)):
        group = list(group or ())
        for index, name in enumerate(parameter_names):
            if index in group or name in group:
                flags[index] |= bits
    return tuple(flags)
