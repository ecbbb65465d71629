"""Result rows on disk: ``results/<gpu>/bench/<chapter>.csv``, replaced row by row, atomically.

The CSV is the source of every table in the book, so two rules hold:

- A new run *replaces* the rows it re-measured (same chapter, variant, shape, dtype) and keeps all
  others, so re-running one variant does not erase the rest of a sweep.
- Two processes writing the same file at once lose nothing: each takes an exclusive ``flock`` on a
  sibling ``.lock`` file for the whole read-modify-write, writes a temporary file in the same folder
  and ``os.replace``-s it over the CSV. A reader therefore sees either the old or the new file, never
  a half-written one, and needs no lock. (``flock`` is POSIX; this project runs on Linux.)
"""

from __future__ import annotations

import csv
import fcntl
import io
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Mapping

from .paths import atomic_write
from .provenance import FIELDS as PROVENANCE_FIELDS

#: Columns every bench CSV has, in order. Extra keys in rows are appended after these.
COLUMNS = [
    "chapter", "variant", "backend", "shape", "dtype", "status", "flops", "nbytes",
    "ms_median", "ms_min", "ms_max", "tflops", "gbps", "sol_pct", "ceiling_pct", "vs_ref",
    "predicted_ms", "below_floor", "peak_mem_bytes", "alloc_retries", "sdpa_backend", "max_rel_err",
    "timer", "error", "source_hash", *PROVENANCE_FIELDS,
]

#: A row is identified by these; a new row replaces an old one with the same key.
KEY = ("chapter", "variant", "shape", "dtype")


def bench_csv_path(chapter: str, slug: str | None = None) -> Path:
    from .paths import results_dir

    return results_dir(slug) / "bench" / f"{chapter}.csv"


@contextmanager
def locked(path: Path):
    """Hold an exclusive lock for read-modify-write of ``path`` (a ``<name>.lock`` beside it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def read_rows(path: Path) -> list[dict[str, str]]:
    """All rows of a CSV as strings (empty when it does not exist)."""
    path = Path(path)
    if not path.exists():
        return []
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if value != value else f"{value:.6g}"
    return str(value)


def write_rows(path: Path, rows: Iterable[Mapping], key: tuple[str, ...] = KEY) -> Path:
    """Replace rows with the same ``key`` in ``path`` by ``rows`` (adding the rest); atomic and locked."""
    path = Path(path)
    new = [{k: _cell(v) for k, v in row.items()} for row in rows]
    new_keys = {tuple(r.get(k, "") for k in key) for r in new}
    with locked(path):
        kept = [r for r in read_rows(path) if tuple(r.get(k, "") for k in key) not in new_keys]
        extra = [c for r in (*kept, *new) for c in r if c not in COLUMNS]
        columns = COLUMNS + list(dict.fromkeys(extra))
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(kept + new)
        atomic_write(path, text.getvalue())
    return path
