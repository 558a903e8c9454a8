"""``kernel.warmup(...)``: compile a kernel for given argument types without launching it, as
Triton's ``JITFunction.warmup``; and ``MockTensor``, the stand-in for a tensor of a dtype.

Arguments may be real tensors, or stand-ins (runtime/stand_ins.py): a torch / NumPy dtype, a
``tl.dtype`` or a :class:`MockTensor` mean "a 16-byte-aligned tensor of that dtype"; a type
string ("*fp32", "i32", "fp16") means an argument of that type. The result is the
CompiledKernel (``name``, ``asm``, ``metadata``, ``n_regs``, ``n_spills``); its cubin goes to
the disk cache, so that a later launch with the same specialization loads it instead of
compiling.

Example::

    compiled = add_kernel.warmup(torch.float32, torch.float32, torch.float32, 1000,
                                 BLOCK=1024, grid=(1,))
    assert compiled.n_spills == 0
"""
from __future__ import annotations

# The stand-ins (MockTensor for a tensor of a dtype, ...) live with the specialization they
# feed, in runtime/stand_ins.py; here under the names tessera.MockTensor and this module had.
from .runtime.stand_ins import MockTensor, TypedStandIn, stand_in  # noqa: F401


def warmup_kernel(jit_fn, keys, constexprs, options):
    """Compiles one specialization of ``jit_fn`` (see the module docstring); None in interpret
    mode, as Triton's interpreter (there is nothing to compile)."""
    from .config import knobs
    from .runtime import launcher
    interpret = knobs.interpret if jit_fn.interpret is None else jit_fn.interpret
    if interpret:
        return None
    specialization = jit_fn._specialization(keys)
    compile_options = options.compile_options(launcher.default_arch())
    constexpr_dict = jit_fn._constexpr_dict(constexprs, keys)

    def compile_one():
        return launcher.compile_and_store(jit_fn, specialization, constexpr_dict,
                                          compile_options)

    from .host_api import active_mode
    mode = active_mode.get()
    if mode is not None:  # AsyncCompileMode: compile in its executor, return a FutureKernel
        return mode.submit((id(jit_fn), keys, constexprs, compile_options), compile_one,
                           lambda kernel: None)  # compile_and_store cached it on disk
    return compile_one()
