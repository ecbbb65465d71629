"""A reader's submission: the cells marked for an exercise, from a notebook file or from the live session.

A cell belongs to exercise ``NAME`` when one of its first lines is the marker ``# exercise: NAME`` (Python) or
``// exercise: NAME`` (CUDA under ``%%cuda_kernel``). An exercise takes at most one cell of each kind: a cell magic
(``%%cuda_kernel``) and a Python cell. When several cells of a kind carry the marker, the last one counts: the last
in the notebook's order, or in a live session the last one run, so a reader who edits and re-runs a cell is graded
on what they ran last. Cell-magic cells come first in the submission, the Python cell last, so the Python cell can
use the kernels at once. Nothing else of the notebook is graded: imports beyond the standard ones
(:data:`PREAMBLE`) and helpers must be in the marked cells.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import LabError
from ..store.fingerprint import read_notebook

#: Run before the submission's cells, in the grading process: what every exercise notebook's first cell imports.
PREAMBLE = """\
%load_ext labmagic
import math
import torch
import triton
import triton.language as tl
import labmagic
"""

_MARKER = re.compile(r"^\s*(?:#|//)\s*exercise:\s*([A-Za-z_][A-Za-z0-9_]*)\s*$")
#: How many lines (after a cell magic's own line) may come before the marker.
_MARKER_LINES = 4


@dataclass(frozen=True)
class Submission:
    """The cells to run for ``exercise``, in order, and where they came from (for messages)."""

    exercise: str
    cells: tuple[str, ...]
    origin: str

    def to_record(self) -> dict:
        return {"exercise": self.exercise, "cells": list(self.cells), "origin": self.origin}

    @classmethod
    def from_record(cls, record: dict) -> Submission:
        return cls(str(record["exercise"]), tuple(str(c) for c in record["cells"]), str(record.get("origin", "")))


def cell_kind(source: str) -> str:
    """``cuda_kernel`` for a ``%%cuda_kernel`` cell (any cell magic by its name), else ``python``."""
    first = source.lstrip().split("\n", 1)[0]
    if first.startswith("%%"):
        return first[2:].split()[0] if first[2:].split() else "python"
    return "python"


def marked_for(source: str) -> str | None:
    """The exercise a cell is marked for, or None."""
    lines = source.lstrip().splitlines()
    if lines and lines[0].startswith("%%"):
        lines = lines[1:]
    for line in lines[:_MARKER_LINES]:
        match = _MARKER.match(line)
        if match:
            return match.group(1)
    return None


def from_cells(sources: list[str], exercise: str, origin: str) -> Submission:
    """The submission for ``exercise`` among ``sources`` (in notebook or execution order)."""
    last: dict[str, str] = {}
    for source in sources:
        if marked_for(source) == exercise:
            last.pop(cell_kind(source), None)  # keep the insertion order of the last occurrence
            last[cell_kind(source)] = source
    if not last:
        raise LabError(f"no cell in {origin} is marked for exercise {exercise!r}: the stub's cells start with "
                       f"`# exercise: {exercise}` (or `// exercise: {exercise}` under %%cuda_kernel)")
    ordered = [src for kind, src in last.items() if kind != "python"] + ([last["python"]] if "python" in last else [])
    return Submission(exercise, tuple(ordered), origin)


def from_notebook(path: Path | str, exercise: str) -> Submission:
    """The submission for ``exercise`` in a saved notebook (the reader's exercise notebook, or a solution)."""
    path = Path(path)
    if not path.exists():
        raise LabError(f"{path} does not exist")
    nb = read_notebook(path)
    sources = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            source = cell.get("source", "")
            sources.append("".join(source) if isinstance(source, list) else str(source))
    return from_cells(sources, exercise, path.name)


def from_session(shell, exercise: str) -> Submission:
    """The submission for ``exercise`` among the cells run so far in ``shell`` (an IPython shell), as typed."""
    history = list(getattr(shell.history_manager, "input_hist_raw", []) or [])
    try:
        return from_cells([h for h in history if isinstance(h, str)], exercise, "this notebook's session")
    except LabError as exc:
        raise LabError(f"{exc}; run the exercise's cells, then grade them") from None
