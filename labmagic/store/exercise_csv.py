"""The exercises' grades on a GPU: ``results/<gpu>/exercises.csv``, one row per exercise and source.

The schema is written once, here, as the bench CSV's is in :mod:`.schema`: :class:`ExerciseRow`'s fields, in order,
are the columns and their types, followed by the run's provenance (:data:`.schema.PROVENANCE_FIELDS`). A new grade
replaces the row with the same :data:`KEY` and keeps the others, under the same lock and atomic replace as the bench
CSVs (:func:`.bench_csv.locked`).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path

from ..errors import LabError
from ..paths import results_dir
from .bench_csv import merge_rows
from .schema import PROVENANCE_FIELDS, format_cell

#: What was graded: the solution in ``book/solutions/``, or the reader's exercise notebook.
SOURCES = ("solution", "notebook")


@dataclass
class ExerciseRow:
    """One exercise's grade: a line of the CSV."""

    chapter: str
    exercise: str
    language: str
    source: str
    status: str
    ms: float | None = None
    bar_ms: float | None = None
    seed: int | None = None
    verdict: str = ""


#: Every exercises CSV has exactly these columns, in this order.
COLUMNS = [f.name for f in fields(ExerciseRow)] + PROVENANCE_FIELDS
#: A row is identified by these; a new row replaces an old one with the same key.
KEY = ("exercise", "source")
#: Column -> the Python type its text stands for, read from :class:`ExerciseRow`'s annotations.
TYPES = {f.name: float if str(f.type).startswith("float") else int if str(f.type).startswith("int") else str
         for f in fields(ExerciseRow)}


def exercises_csv_path(slug: str | None = None) -> Path:
    return results_dir(slug) / "exercises.csv"


def write_exercise_rows(rows: Iterable[ExerciseRow], provenance: dict, slug: str | None = None) -> Path:
    """Replace the rows with the same key by ``rows`` (with ``provenance`` on each), keep the rest; atomic, locked."""
    path = exercises_csv_path(slug)
    new = []
    for row in rows:
        if row.source not in SOURCES:
            raise LabError(f"exercise row source {row.source!r} is not one of {', '.join(SOURCES)}")
        cells = {f.name: format_cell(getattr(row, f.name)) for f in fields(ExerciseRow)}
        cells.update({k: format_cell(provenance.get(k, "")) for k in PROVENANCE_FIELDS})
        new.append(cells)
    return merge_rows(path, new, COLUMNS, KEY)


def read_exercise_rows(slug: str | None = None) -> list[ExerciseRow]:
    """The rows of ``results/<slug>/exercises.csv`` (none when it does not exist); a CSV with other columns is
    refused rather than guessed at."""
    path = exercises_csv_path(slug)
    if not path.exists():
        return []
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames != COLUMNS:
            raise LabError(f"{path}: its columns are not labmagic.store.exercise_csv.COLUMNS")
        return [ExerciseRow(**{f.name: _parse(f.name, r[f.name]) for f in fields(ExerciseRow)}) for r in reader]


def _parse(name: str, text: str):
    kind = TYPES[name]
    if kind is str:
        return text
    return kind(text) if text else None
