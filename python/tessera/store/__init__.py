"""The on-disk store: kernel_cache.py (entries by key and namespace, checksummed, written
whole, one compiling process per key under a lock; compiled kernels, autotuning records, the
front end's source index, the ptxas release) and remote_cache.py (its optional remote
backends, TESSERA_REMOTE_CACHE).

A ground floor: the front end and the compiler keep what they learn here, as the runtime
keeps cubins. Its public paths are Triton's and Tessera's older ones,
``tessera.runtime.kernel_cache`` and ``tessera.runtime.remote_cache`` (the same modules).
"""
