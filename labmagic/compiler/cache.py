"""The compile cache: a CompileResult per key, in memory and on disk (``cache_dir()``, one ``.cubin`` and one
``.json`` per key), so that an unchanged cell is served without running NVRTC again.

The key hashes everything the CUBIN depends on: source, architecture, options, name expressions and NVRTC's
version. The disk copy is written atomically; a read-only or corrupt cache is treated as a miss.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time

from ..paths import atomic_write, cache_dir
from .compile_result import CompileResult
from .resources import parse_ptxas_log

_MEMORY: dict[str, CompileResult] = {}


def cache_key(source: str, arch: str, options: tuple[str, ...], name_expressions: tuple[str, ...],
              version: str) -> str:
    text = json.dumps([source, arch, list(options), list(name_expressions), version])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def lookup(key: str) -> CompileResult | None:
    """The cached result for ``key`` (``origin`` says ``memory`` or ``disk``), or None."""
    hit = _MEMORY.get(key)
    if hit is not None:
        return dataclasses.replace(hit, origin="memory", seconds=0.0)
    start = time.perf_counter()
    hit = _load_disk(key)
    if hit is not None:
        hit = dataclasses.replace(hit, origin="disk", seconds=time.perf_counter() - start)
        _MEMORY[key] = hit
    return hit


def store(result: CompileResult, version: str) -> None:
    _MEMORY[result.key] = result
    _store_disk(result, version)


def forget(key: str | None = None) -> None:
    """Drop one key (or everything) from the memory cache; the disk copy stays."""
    if key is None:
        _MEMORY.clear()
    else:
        _MEMORY.pop(key, None)


def _load_disk(key: str) -> CompileResult | None:
    folder = cache_dir()
    meta_path, cubin_path = folder / f"{key}.json", folder / f"{key}.cubin"
    try:
        meta = json.loads(meta_path.read_text())
        cubin = cubin_path.read_bytes()
    except (OSError, ValueError):
        return None
    try:
        return CompileResult(
            source=meta["source"], arch=meta["arch"], options=tuple(meta["options"]), cubin=cubin,
            ptx=meta.get("ptx"), log=meta["log"], lowered=dict(meta["lowered"]),
            resources=parse_ptxas_log(meta["log"]), key=key, first_line=meta.get("first_line", 1),
            types=dict(meta.get("types", {})),
        )
    except (KeyError, TypeError, ValueError):
        return None


def _store_disk(result: CompileResult, version: str) -> None:
    folder = cache_dir()
    try:
        atomic_write(folder / f"{result.key}.cubin", result.cubin)
        meta = {
            "source": result.source, "arch": result.arch, "options": list(result.options), "ptx": result.ptx,
            "log": result.log, "lowered": result.lowered, "first_line": result.first_line, "types": result.types,
            "nvrtc": version,
        }
        atomic_write(folder / f"{result.key}.json", json.dumps(meta).encode())
    except OSError:
        pass  # a read-only home must not break compiling; the memory cache still works
