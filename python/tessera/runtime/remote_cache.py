"""``tessera.runtime.remote_cache``: the disk cache's remote backends (RemoteCacheBackend,
RedisRemoteCacheBackend), which live beside it in store/remote_cache.py; this path is that
very module."""
import sys

from ..store import remote_cache as _remote_cache

sys.modules[__name__] = _remote_cache
