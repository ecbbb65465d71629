"""Result rows on disk: ``results/<gpu>/bench/<chapter>.csv``, replaced row by row, atomically.

The CSV is the source of every table in the book, so two rules hold:

- A new run *replaces* the rows it re-measured (same chapter, variant, shape, dtype) and keeps all
  others, so re-running one variant does not erase the rest of a sweep.
- Two processes writing the same file at once lose nothing: each takes an exclusive ``flock`` on a
  sibling ``.lock`` file for the whole read-modify-write, writes a temporary file in the same folder
  and ``os.replace``-s it over the CSV. A reader therefore sees either the old or the new file, never
  a half-written one, and needs no lock. (``flock`` is POSIX; this project runs on Linux.) A write that
  fails (a full disk) leaves the CSV as it was and says so in one line naming it.

A row is written only when the readers will accept it (:func:`labmagic.store.schema.row_problem`).
"""

from __future__ import annotations

import csv
import fcntl
import io
from collections.abc import Iterable, Mapping
from contextlib import contextmanager
from pathlib import Path

from ..errors import LabError
from ..paths import atomic_write, check_chapter_name, results_dir
from .schema import COLUMNS, EARLIER_COLUMNS, KEY, format_row, row_problem


def bench_csv_path(chapter: str, slug: str | None = None) -> Path:
    """``results/<slug>/bench/<chapter>.csv``; the PNGs and the ``.lock`` are named after it, so the name is checked."""
    return results_dir(slug) / "bench" / f"{check_chapter_name(chapter)}.csv"


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


def write_rows(path: Path, rows: Iterable[Mapping], key: tuple[str, ...] = KEY) -> Path:
    """Replace rows with the same ``key`` in ``path`` by ``rows`` (adding the rest); atomic and locked. A
    LabError naming the CSV, which is left as it was, for a row the readers would refuse or a failed write."""
    path = Path(path)
    new = [format_row(row) for row in rows]
    unknown = sorted({c for r in new for c in r if c not in COLUMNS})
    if unknown:
        raise LabError(f"{path.name}: no bench CSV column is called {', '.join(unknown)} "
                       f"(the columns are labmagic.store.schema.COLUMNS)")
    for row in new:
        problem = row_problem(row)
        if problem:
            raise LabError(f"{path}: not writing a row that no reader would accept: {problem}")
    return merge_rows(path, new, COLUMNS, key)


def merge_rows(path: Path, new: list[Mapping], columns: list[str], key: tuple[str, ...]) -> Path:
    """Replace the rows of the CSV at ``path`` whose ``key`` cells match one of ``new`` by ``new`` and keep the
    rest, under the file's lock, written whole to a temporary that replaces the file; a failed write is a LabError
    naming the CSV, which is left as it was."""
    new_keys = {tuple(r.get(k, "") for k in key) for r in new}
    try:
        with locked(path):
            kept = [r for r in read_rows(path) if tuple(r.get(k, "") for k in key) not in new_keys]
            text = io.StringIO()
            writer = csv.DictWriter(text, fieldnames=columns, restval="", extrasaction="ignore")
            writer.writeheader()
            writer.writerows(kept + new)
            atomic_write(path, text.getvalue())
    except OSError as exc:
        raise LabError(f"{path}: {len(new)} row(s) not written ({exc.strerror or exc}); the CSV is as it "
                       "was") from None
    return path


def upgrade(path: Path) -> bool:
    """Rewrite a CSV that an earlier labmagic wrote (a header in :data:`~labmagic.store.schema.EARLIER_COLUMNS`)
    with today's columns, the new ones empty and the retired ones gone; False when it already has them. Anything
    else is refused: a CSV of unknown shape is not guessed at."""
    path = Path(path)
    with locked(path):
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.reader(handle, strict=True)
            header = next(reader, None)
            if header == COLUMNS:
                return False
            if header not in EARLIER_COLUMNS:
                raise LabError(f"{path}: its header is neither labmagic.store.schema.COLUMNS nor an earlier one")
            rows = [dict(zip(header, record)) for record in reader if record]
        text = io.StringIO()
        # What an earlier header has that COLUMNS does not (max_rel_err) is dropped: it meant something else.
        writer = csv.DictWriter(text, fieldnames=COLUMNS, restval="", extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
        atomic_write(path, text.getvalue())
    return True
