"""The parts of JITFunction (jit.py) that Triton code uses to compile without launching and
to work with a kernel's source text: ``warmup`` (warmup.py does the work), ``src`` and
``_unsafe_update_src`` (as Triton's; its own tests patch kernels this way).

Example::

    compiled = kernel.warmup(torch.float32, torch.float32, 1024, BLOCK=256, grid=(1,))
    kernel._unsafe_update_src(kernel.src.replace("+ 1", "* 3"))
"""
from __future__ import annotations

import sys

from ._tessera import runtime as _runtime


class KernelTextAndWarmup:
    """Mixed into JITFunction (which provides run, _kernels, _tile_ir, ...)."""

    def warmup(self, *args, grid=None, **kwargs):
        """Compiles for these arguments without launching, as Triton's ``kernel.warmup``;
        returns the CompiledKernel (``name``, ``asm``, ``metadata``, ``n_regs``, ``n_spills``).

        Arguments may be tensors, or stand-ins for them: a torch / NumPy dtype or a
        ``tl.dtype`` (a 16-byte-aligned tensor of that dtype), or a type string such as
        ``"*fp32"`` or ``"i32"``. Example::

            compiled = kernel.warmup(torch.float32, torch.float32, 1024, BLOCK=256, grid=(1,))
            print(compiled.n_regs, compiled.asm["ptx"])
        """
        from .runtime.stand_ins import stand_in
        args, kwargs = self._as_run_call(args, kwargs)  # a parameter named warmup, say
        return self.run(*map(stand_in, args), grid=grid, warmup=True,
                        **{k: stand_in(v) if k in self.runtime_names else v
                           for k, v in kwargs.items()})

    def _warmup(self, keys, constexprs, options):
        from .warmup import warmup_kernel
        return warmup_kernel(self, keys, constexprs, options)

    @property
    def src(self) -> str:
        """The kernel's source text (from ``def``), as Triton's ``JITFunction.src``; set it
        with :meth:`_unsafe_update_src`."""
        from .frontend.source import function_source_text
        return function_source_text(self.fn)

    @src.setter
    def src(self, value: str) -> None:
        raise AttributeError("Cannot set attribute 'src' directly: use _unsafe_update_src() "
                             "(as Triton)")

    def _unsafe_update_src(self, new_src: str) -> None:
        """Compiles the kernel from ``new_src`` from now on (as Triton; its tests patch kernels
        this way). Kernels that inline this one notice on their next Python-path launch."""
        from .frontend.source import set_function_source
        set_function_source(self.fn, new_src)
        self.hash = None
        self._kernels.clear()
        self._tile_ir.clear()
        self._tile_ir_source = None
        self._source_key = None
        self._dispatch_clear()
        jit_module = sys.modules["tessera.jit"]  # `tessera.jit` is the decorator
        jit_module._jit_generation += 1
        self._generation = jit_module._jit_generation
        # Creating a dispatcher bumps the C++ fast path's generation: every kernel (those that
        # inline this one too) takes the Python path once and checks its sources.
        _runtime.KernelDispatcher()
