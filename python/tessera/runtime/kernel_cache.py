"""``tessera.runtime.kernel_cache``: the on-disk cache (KernelCache, cache_key), which lives
on the ground floor in store/kernel_cache.py, where the front end and the compiler keep what
they learn too; this path is that very module.
Example: ``from tessera.runtime.kernel_cache import KernelCache; KernelCache().root``."""
import sys

from ..store import kernel_cache as _kernel_cache

sys.modules[__name__] = _kernel_cache
