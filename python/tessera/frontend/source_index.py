"""What a fresh process would otherwise recompute to read a kernel's sources, kept on disk.

The source key of a launch (source.py) needs, per @jit function, its lines (finding where a
function ends tokenizes its file: milliseconds) and the dotted names its body reads (a parse
and a walk of its AST). A process that finds its kernels in the disk cache would spend most of
its warm start there. This index keeps both, one cache entry per source file (namespace
"sources" of store/kernel_cache.py: atomic, checksummed):

* a function's length in lines, keyed by the file's text (SHA-256 of the lines linecache holds,
  which inspect reads too) and by the function's qualified name and first line: an extent is a
  function of the text and the first line alone, so a file rewritten with the same text (a
  script written again, a reinstalled package, a checkout) keeps its index, and any edit makes a
  new one; a ``def``'s block is still checked to end where the code does;
* its dotted names, kept beside the SHA-256 of the very text they were read from: they are used
  only for that text.

Anything missing, stale or unreadable is a miss: the caller computes it as before and records
it; :func:`flush` writes what was recorded (once per new kernel, never on a warm start).
"""
from __future__ import annotations

import hashlib
import json
import linecache
from typing import Any, Callable, Dict, List, Optional, Tuple

_NAMESPACE = "sources"
_FILE = "index.json"


class _FileIndex:
    """The entries of one source file: "qualname:first line" -> {"lines", "sha", "names"}."""

    def __init__(self, key: Optional[str], functions: Dict[str, Dict[str, Any]]) -> None:
        self.key = key
        self.functions = functions
        self.dirty = False


# filename -> its index in this process (None key: a file that cannot be indexed)
_FILES: Dict[str, _FileIndex] = {}


def _cache():
    from ..store.kernel_cache import KernelCache
    return KernelCache(namespace=_NAMESPACE)


# filename -> (the lines linecache held, their key): a file's text is hashed once per read.
_KEYS: Dict[str, Tuple[List[str], str]] = {}


def _file_key(fn: Callable) -> Optional[str]:
    """The key of the text of ``fn``'s file as linecache holds it (None: no text, e.g. a
    function made by exec whose string is not registered)."""
    filename = fn.__code__.co_filename
    lines = linecache.getlines(filename, getattr(fn, "__globals__", None))
    if not lines:
        return None
    known = _KEYS.get(filename)
    if known is not None and known[0] is lines:
        return known[1]
    digest = hashlib.sha256(b"tessera source index 2\0")
    digest.update("".join(lines).encode("utf-8", "surrogatepass"))
    key = digest.hexdigest()
    _KEYS[filename] = (lines, key)
    return key


def _index_of(fn: Callable) -> _FileIndex:
    filename = fn.__code__.co_filename
    key = _file_key(fn)
    index = _FILES.get(filename)
    if index is not None and index.key == key:
        return index
    functions: Dict[str, Dict[str, Any]] = {}
    if key is not None:
        stored = _cache().get(key)
        if stored is not None and _FILE in stored:
            try:
                loaded = json.loads(stored[_FILE])
                if isinstance(loaded, dict):
                    functions = loaded
            except ValueError:
                pass
    index = _FILES[filename] = _FileIndex(key, functions)
    return index


def _function_key(fn: Callable) -> str:
    return f"{fn.__qualname__}:{fn.__code__.co_firstlineno}"


def _ends_there(lines: List[str], first: int, length: int) -> bool:
    """Whether a block of ``length`` lines from line ``first`` (1-based) is plausibly the whole
    function: it starts with its decorator or def, its last line is not blank, and the next
    line (if any) is blank, a comment or no more indented than the def."""
    if length <= 0 or first - 1 + length > len(lines):
        return False
    head = lines[first - 1]
    indent = len(head) - len(head.lstrip())
    if not head.lstrip().startswith(("@", "def ", "async def ")):
        return False
    if not lines[first - 2 + length].strip():  # code, or a comment indented as the body
        return False
    if first - 1 + length == len(lines):
        return True
    after = lines[first - 1 + length]
    stripped = after.strip()
    return not stripped or stripped.startswith("#") or len(after) - len(after.lstrip()) <= indent


def block(fn: Callable, lines: List[str]) -> Optional[Tuple[List[str], int]]:
    """(lines, first line) of ``fn`` as inspect.getsourcelines gives them, from the index;
    None when it does not know (``lines``: the whole file, as linecache holds it)."""
    entry = _index_of(fn).functions.get(_function_key(fn))
    if not isinstance(entry, dict) or not isinstance(entry.get("lines"), int):
        return None
    first, length = fn.__code__.co_firstlineno, entry["lines"]
    if fn.__name__ == "<lambda>":
        # inspect gives a lambda the rest of its statement: no def to check the block by (the
        # key, the file's text, already says the entry was computed from these very lines).
        if not 0 < length <= len(lines) - first + 1:
            return None
    elif not _ends_there(lines, first, length):
        return None
    return lines[first - 1:first - 1 + length], first


def remember_block(fn: Callable, length: int) -> None:
    index = _index_of(fn)
    if index.key is None:
        return
    entry = index.functions.setdefault(_function_key(fn), {})
    if entry.get("lines") != length:
        entry["lines"] = length
        index.dirty = True


def dotted_names(fn: Callable, source: str) -> Optional[List[List[str]]]:
    """The dotted names read in ``source`` (fn's dedented text) when the index holds them for
    exactly this text; else None."""
    entry = _index_of(fn).functions.get(_function_key(fn))
    if not isinstance(entry, dict) or entry.get("sha") != _sha(source):
        return None
    names = entry.get("names")
    return names if isinstance(names, list) else None


def remember_names(fn: Callable, source: str, names: List[List[str]]) -> None:
    index = _index_of(fn)
    if index.key is None:
        return
    entry = index.functions.setdefault(_function_key(fn), {})
    sha = _sha(source)
    if entry.get("sha") != sha:
        entry.update(sha=sha, names=names)
        index.dirty = True


def flush() -> None:
    """Writes the files whose index changed (each as one atomic cache entry)."""
    for index in _FILES.values():
        if index.dirty and index.key is not None:
            index.dirty = False
            # The file's index grows as its functions are indexed: replace the older one.
            _cache().put(index.key, {_FILE: json.dumps(index.functions).encode()},
                         replace=True)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
