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
