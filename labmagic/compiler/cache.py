"""The compile cache: a CompileResult per key, in memory and on disk (``cache_dir()``, one ``.cubin`` and one
``.json`` per key), so that an unchanged cell is served without running NVRTC again.

The key is a sha256 over everything the CUBIN depends on (:func:`labmagic.compiler.nvrtc.compile` lists it: source,
architecture, options, name expressions, first line, NVRTC's version, include folders, and the text of every header
the compile read). The disk copy vouches for itself: its ``.json`` holds those inputs (which must hash to the key it
is filed under), the sha256 of the CUBIN, of the source and of the rest of the result, and every one is checked on
load; an entry that fails a check (a truncated, empty or swapped ``.cubin``, an edited ``.json``) is a miss that
recompiles, said once in one line. Both files are written atomically; a read-only cache folder costs only the disk
copy (kernels load from the checked bytes in memory, :mod:`.cubin_load`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
import time

from ..paths import atomic_write, cache_dir
from .compile_result import CompileResult
from .includes import Header
from .resources import parse_ptxas_log

#: The layout of the ``.json``; an entry of another layout is not read.
FORMAT = 2

_MEMORY: dict[str, CompileResult] = {}
#: Keys whose disk entry was refused and said so: said once per process.
_REFUSED: set[str] = set()


def cache_key(inputs: list) -> str:
    """The key of a compile whose inputs are ``inputs`` (JSON-able)."""
    return _sha256(json.dumps(inputs, sort_keys=True).encode())[:32]


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


def store(result: CompileResult, inputs: list) -> None:
    """Keep ``result`` under its key (the hash of ``inputs``), in memory and on disk."""
    _MEMORY[result.key] = result
    _store_disk(result, inputs)


def forget(key: str | None = None) -> None:
    """Drop one key (or everything) from the memory cache; the disk copy stays."""
    if key is None:
        _MEMORY.clear()
    else:
        _MEMORY.pop(key, None)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fields(result: CompileResult) -> dict:
    """What the ``.json`` keeps of ``result`` besides the CUBIN (the resources are read again from the log)."""
    return {
        "source": result.source, "arch": result.arch, "options": list(result.options), "ptx": result.ptx,
        "log": result.log, "lowered": result.lowered, "first_line": result.first_line, "types": result.types,
        "headers": [dataclasses.asdict(h) for h in result.headers],
    }


def _fields_sha256(fields: dict) -> str:
    return _sha256(json.dumps(fields, sort_keys=True).encode())


def _refuse(key: str, why: str) -> None:
    """Say once that the disk entry of ``key`` is not served, and why."""
    if key not in _REFUSED:
        _REFUSED.add(key)
        print(f"labmagic: compile cache entry {key} in {cache_dir()} {why}: not used, compiling again",
              file=sys.stderr)


def _load_disk(key: str) -> CompileResult | None:
    folder = cache_dir()
    meta_path, cubin_path = folder / f"{key}.json", folder / f"{key}.cubin"
    try:
        text = meta_path.read_bytes()
    except OSError:
        return None  # never stored here, or a cache folder that cannot be read: a plain miss
    why = None
    try:
        meta = json.loads(text)
        sums, fields = meta["sha256"], meta["result"]
        if meta.get("format") != FORMAT:
            why = "is of another format"
        elif cache_key(meta["inputs"]) != key:
            why = "was written for other inputs (its .json does not hash to its key)"
        elif _fields_sha256(fields) != sums["result"] or _sha256(fields["source"].encode()) != sums["source"]:
            why = "has a .json edited since it was written (its checksums do not match)"
    except (ValueError, KeyError, TypeError, AttributeError):
        why = "has a .json that is not a cache entry"
    if why is None:
        try:
            cubin = cubin_path.read_bytes()
        except OSError as exc:
            cubin, why = b"", f"has no readable .cubin ({exc.__class__.__name__})"
        if why is None and (not cubin or _sha256(cubin) != sums["cubin"]):
            why = "has a .cubin that is not the one compiled (empty, truncated or replaced)"
    if why is not None:
        _refuse(key, why)
        return None
    try:
        return CompileResult(
            source=fields["source"], arch=fields["arch"], options=tuple(fields["options"]), cubin=cubin,
            ptx=fields["ptx"], log=fields["log"], lowered=dict(fields["lowered"]),
            resources=parse_ptxas_log(fields["log"]), key=key, first_line=int(fields["first_line"]),
            types=dict(fields["types"]), headers=tuple(Header(**h) for h in fields["headers"]),
        )
    except (KeyError, TypeError, ValueError):
        _refuse(key, "has a .json that is not a cache entry")
        return None


def _store_disk(result: CompileResult, inputs: list) -> None:
    folder = cache_dir()
    fields = _fields(result)
    meta = {
        "format": FORMAT, "inputs": inputs, "result": fields,
        "sha256": {"cubin": _sha256(result.cubin), "source": _sha256(result.source.encode()),
                   "result": _fields_sha256(fields)},
    }
    try:
        atomic_write(folder / f"{result.key}.cubin", result.cubin)
        atomic_write(folder / f"{result.key}.json", json.dumps(meta).encode())
    except OSError:
        return  # a read-only home must not break compiling; the memory cache still works
    _REFUSED.discard(result.key)  # the entry is whole again: should it break later, say so again
