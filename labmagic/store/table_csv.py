"""Side tables in ``results/<gpu>/`` that are not bench rows: what a ``benchmarks/`` script measured (timer
agreement, compile cache, tile-shape searches, profiles). One CSV per script, its columns those of its rows."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..errors import LabError


def write_table(rows: Sequence[Mapping], path: Path) -> Path:
    """Write ``rows`` (dicts with the same keys, in column order) to ``path`` as CSV, replacing it; return it."""
    if not rows:
        raise LabError(f"no rows to write to {path}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def read_table(path: Path | str, columns: Sequence[str], name: str, header_of: str) -> list[tuple[str, dict]]:
    """The records of a side table that arrived from another machine, each as ``(where, row)``: ``where`` is
    "NAME, line N" for the caller's own cell checks, ``row`` maps ``columns`` to the cell texts. A header other than
    ``columns`` (named ``header_of`` in the message), a record of another length, a file that is not CSV or not UTF-8
    text: a :class:`LabError` naming the file (``name``) and the line."""
    records = []
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.reader(handle, strict=True)
            if next(reader, None) != list(columns):
                raise LabError(f"{name}: the header is not {header_of}")
            for record in reader:
                where = f"{name}, line {reader.line_num}"
                if len(record) != len(columns):
                    raise LabError(f"{where}: {len(record)} fields where the header has {len(columns)}")
                records.append((where, dict(zip(columns, record))))
    except csv.Error as exc:
        raise LabError(f"{name}: not a CSV ({exc})") from None
    except UnicodeDecodeError:
        raise LabError(f"{name}: not UTF-8 text") from None
    return records
