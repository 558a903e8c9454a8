"""Grid dependency control (``tl.extra.cuda.gdc_wait`` / ``gdc_launch_dependents``): with
programmatic dependent launch (sm_90 and newer) a kernel may start before the one it depends on
has finished; these PTX ``griddepcontrol`` instructions order the two. Both are safe when
dependent launch is off. The interpreter runs programs one kernel at a time, so there they do
nothing.

Example::

    @tessera.jit
    def consumer(x_ptr, out_ptr):
        cuda.gdc_wait()                 # the producer's writes are visible after this
        tl.store(out_ptr, tl.load(x_ptr))
"""
from __future__ import annotations

from ... import core
from ...inline_asm import inline_asm_elementwise


def _griddepcontrol(instruction: str, _semantic) -> None:
    if getattr(_semantic, "interpreter", False):
        return  # kernels run one after another there: nothing to order
    # A dummy output as Triton's: the asm is kept for its side effect (is_pure=False).
    inline_asm_elementwise(f"griddepcontrol.{instruction}; // dummy $0", "=r", [],
                           dtype=core.int32, is_pure=False, pack=1, _semantic=_semantic)


@core.builtin
def gdc_wait(_semantic=None) -> None:
    """Blocks until every program of the kernel this one depends on has completed and its
    memory writes are visible (PTX ``griddepcontrol.wait``; needs sm_90+).

    Example: ``cuda.gdc_wait()`` before loading what the previous kernel wrote.
    """
    _griddepcontrol("wait", _semantic)


@core.builtin
def gdc_launch_dependents(_semantic=None) -> None:
    """Signals that the dependent kernel may launch once every program of this one has called
    it or completed; calls after the first have no effect (PTX
    ``griddepcontrol.launch_dependents``; needs sm_90+).

    Example: ``cuda.gdc_launch_dependents()`` once this program's inputs are read.
    """
    _griddepcontrol("launch_dependents", _semantic)
