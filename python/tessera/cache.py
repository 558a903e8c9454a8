"""``python -m tessera.cache``: list, size and clear the on-disk cache (store/kernel_cache.py).

    python -m tessera.cache list  [--kind kernels|tuning|toolchain|sources|all] [--dir DIR]
    python -m tessera.cache size  [--kind ...]
    python -m tessera.cache clear [--kind ...]

``list`` shows each entry with its size, age, whether its checksums hold, and what it is (a
kernel's name, arch and warps; a tuning's kernel, device and best config). ``clear`` removes
entries atomically (a concurrent reader sees a whole entry or none) and the debris of writers
that died: staging directories and compile lock files older than an hour (younger ones may
belong to a live writer).
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Optional, Sequence

from .config import knobs
from .store.kernel_cache import KernelCache

# toolchain: ptxas --version answers; sources: the source index (frontend/source_index.py)
KINDS = ("kernels", "tuning", "toolchain", "sources")
_STALE_SECONDS = 3600


@dataclass
class Entry:
    kind: str
    key: str
    path: Path
    size: int
    mtime: float
    valid: bool
    summary: str


def _directory_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _summary(kind: str, files: dict) -> str:
    try:
        if kind == "kernels":
            meta = json.loads(files["metadata.json"])
            extra = f" registers={meta['registers']}" if "registers" in meta else ""
            return f"{meta['name']} {meta['arch']} num_warps={meta['num_warps']}{extra}"
        if kind == "toolchain":
            return f"ptxas release {files['version.txt'].decode()}"
        if kind == "sources":
            functions = json.loads(files["index.json"])
            return f"source index of {len(functions)} functions"
        record = json.loads(files["tuning.json"])
        key = record.get("key", {})
        best = record["best"]
        params = ", ".join(f"{k}={v}" for k, v in best["kwargs"].items())
        return (f"{key.get('kernel', '?')} on {key.get('device', '?')} {key.get('arch', '?')} "
                f"key={key.get('key_values')}: {params}, num_warps={best['num_warps']}, "
                f"num_stages={best['num_stages']}")
    except (KeyError, ValueError, TypeError, AttributeError):
        return "(unreadable)"


def entries(directory: Optional[str], kinds: Sequence[str]) -> Iterator[Entry]:
    """Every entry of the chosen namespaces, checked against its checksums."""
    for kind in kinds:
        cache = KernelCache(directory, namespace=kind)
        if not cache.root.is_dir():
            continue
        for shard in sorted(cache.root.iterdir()):
            if not shard.is_dir():
                continue
            for path in sorted(shard.iterdir()):
                if path.name.startswith(".") or not path.is_dir():
                    continue
                try:
                    files = cache.get(path.name)
                except ValueError:  # not a key-shaped name: not an entry
                    continue
                stat = path.stat()
                yield Entry(kind, path.name, path, _directory_size(path), stat.st_mtime,
                            files is not None, _summary(kind, files) if files else "(damaged)")


def _debris(directory: Optional[str], kinds: Sequence[str]) -> List[Path]:
    """Staging (.tmp-*) and trash (.trash-*) directories that writers left behind, and the
    lock files (.lock-*) of compiles (removing one in use costs at most a duplicate compile)."""
    found = []
    for kind in kinds:
        root = KernelCache(directory, namespace=kind).root
        if root.is_dir():
            found += [p for shard in root.iterdir() if shard.is_dir()
                      for p in shard.iterdir() if p.name.startswith((".tmp-", ".trash-", ".lock-"))]
    return found


def _human(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    value = size / 1024
    for unit in ("KiB", "MiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def _age(mtime: float) -> str:
    seconds = max(0, time.time() - mtime)
    for unit, length in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= length:
            return f"{seconds / length:.0f}{unit}"
    return f"{seconds:.0f}s"


def list_entries(directory: Optional[str], kinds: Sequence[str], out) -> int:
    count = 0
    for entry in entries(directory, kinds):
        state = "ok" if entry.valid else "DAMAGED"
        out.write(f"{entry.kind:<8} {entry.key[:16]}  {_human(entry.size):>10}  "
                  f"{_age(entry.mtime):>4}  {state:<7}  {entry.summary}\n")
        count += 1
    out.write(f"{count} entries in {Path(directory or knobs.cache_dir)}\n")
    return 0


def size(directory: Optional[str], kinds: Sequence[str], out) -> int:
    total = 0
    for kind in kinds:
        found = [e for e in entries(directory, [kind])]
        bytes_ = sum(e.size for e in found)
        damaged = sum(1 for e in found if not e.valid)
        total += bytes_
        out.write(f"{kind:<8} {len(found):>6} entries  {_human(bytes_):>10}"
                  + (f"  ({damaged} damaged)" if damaged else "") + "\n")
    debris = _debris(directory, kinds)
    if debris:
        out.write(f"debris   {len(debris):>6} staging/trash directories\n")
    out.write(f"total    {_human(total)}\n")
    return 0


def clear(directory: Optional[str], kinds: Sequence[str], out) -> int:
    """Removes every entry; exits 1, saying why, when some could not be removed."""
    removed, failures = 0, []
    for kind in kinds:
        cache = KernelCache(directory, namespace=kind)
        for entry in list(entries(directory, [kind])):
            try:
                removed += cache.remove(entry.key)
            except OSError as error:
                failures.append(f"{entry.path}: {error.strerror or error}")
    stale = 0
    for path in _debris(directory, kinds):
        try:
            old = time.time() - path.stat().st_mtime > _STALE_SECONDS
        except OSError:
            continue
        if path.name.startswith(".trash-") or old:
            try:
                if path.is_dir():
                    shutil.rmtree(path)
                else:
                    path.unlink()
                stale += 1
            except OSError as error:
                failures.append(f"{path}: {error.strerror or error}")
    out.write(f"removed {removed} entries" + (f" and {stale} leftover directories" if stale
                                              else "") + "\n")
    if failures:
        out.write(f"could not remove {len(failures)}:\n" + "".join(f"  {f}\n" for f in failures))
        return 1
    return 0


def main(argv: Optional[Sequence[str]] = None, out=None) -> int:
    out = out or sys.stdout
    parser = argparse.ArgumentParser(prog="python -m tessera.cache",
                                     description="List, size or clear Tessera's on-disk cache.")
    parser.add_argument("command", choices=("list", "size", "clear"))
    parser.add_argument("--kind", choices=KINDS + ("all",), default="all",
                        help="compiled kernels, tuning results, or both (default)")
    parser.add_argument("--dir", default=None,
                        help="cache directory (default: TESSERA_CACHE_DIR or ~/.cache/tessera)")
    args = parser.parse_args(argv)
    kinds = KINDS if args.kind == "all" else (args.kind,)
    command = {"list": list_entries, "size": size, "clear": clear}[args.command]
    return command(args.dir, kinds, out)


if __name__ == "__main__":
    sys.exit(main())
