"""What an L2 flush by writing costs the next kernel: the table ``benchmarks/flush_write_back.py`` writes to
``results/<gpu>/flush_write_back.csv`` and the Timing page reads (:data:`COLUMNS`, written once here).

``%bench`` evicts the L2 before each timed call by *reading* a buffer twice the L2's size
(:meth:`labmagic.timing.CudaTimer._evict`). Flushing by *writing* (``buffer.zero_()``) evicts too, but leaves the L2
full of dirty lines, written back to HBM inside the next timed interval. The script times one memory-bound kernel
after each flush, alternating, the same number of times; one row holds the medians, the median of the paired
differences (after ``zero_()`` minus after reading, pair ``i`` being the ``i``-th sample of each) with its 95%
interval (:func:`labmagic.timing.noise.median_interval`), the flushes' own times, and the run's provenance.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path

from ..errors import LabError
from ..store.table_csv import read_table
from ..timing.noise import median_interval

#: The CSV's file name under ``results/<gpu>/``.
FILE_NAME = "flush_write_back.csv"
#: The columns, in order. Times are microseconds.
COLUMNS = ("kernel", "n", "kernel_bytes", "l2_bytes", "flush_bytes", "pairs", "after_read_us", "after_zero_us",
           "write_back_us", "write_back_low_us", "write_back_high_us", "read_flush_us", "zero_flush_us",
           "gpu", "driver", "cuda", "torch", "git_commit", "timestamp")
#: Columns that hold a count (a positive integer).
_COUNTS = ("n", "kernel_bytes", "l2_bytes", "flush_bytes", "pairs")
#: Columns that hold a time: finite and >= 0, except the differences, which may be negative (or empty: too few
#: pairs for an interval).
_TIMES = ("after_read_us", "after_zero_us", "read_flush_us", "zero_flush_us")
_DIFFERENCES = ("write_back_us", "write_back_low_us", "write_back_high_us")


def summarize(after_read_us: Sequence[float], after_zero_us: Sequence[float], read_flush_us: Sequence[float],
              zero_flush_us: Sequence[float]) -> dict[str, float | int | None]:
    """The timed columns of a row from the samples: pair ``i`` is ``after_read_us[i]`` and ``after_zero_us[i]``."""
    if not after_read_us or len(after_read_us) != len(after_zero_us):
        raise ValueError(f"paired samples needed: {len(after_read_us)} after reading, {len(after_zero_us)} after "
                         "zero_()")
    differences = [z - r for r, z in zip(after_read_us, after_zero_us)]
    interval = median_interval(differences)
    return {
        "pairs": len(differences),
        "after_read_us": statistics.median(after_read_us),
        "after_zero_us": statistics.median(after_zero_us),
        "write_back_us": statistics.median(differences),
        "write_back_low_us": interval[0] if interval else None,
        "write_back_high_us": interval[1] if interval else None,
        "read_flush_us": statistics.median(read_flush_us),
        "zero_flush_us": statistics.median(zero_flush_us),
    }


def format_row(values: dict) -> dict[str, str]:
    """``values`` (every column) as the CSV's cells: times to 0.01 us, None as empty."""
    missing = [c for c in COLUMNS if c not in values]
    if missing:
        raise ValueError(f"a {FILE_NAME} row needs {', '.join(missing)}")
    out = {}
    for col in COLUMNS:
        value = values[col]
        if value is None:
            out[col] = ""
        elif col in _TIMES or col in _DIFFERENCES:
            out[col] = f"{float(value):.2f}"
        else:
            out[col] = str(value)
    return out


def read_write_back_csv(path: Path | str, name: str | None = None) -> list[dict]:
    """The rows of a ``flush_write_back.csv``, counts as ints and times as floats (None where empty). The file comes
    from another machine: anything :func:`format_row` does not write is a :class:`LabError` naming the file
    (``name``, else its path) and the line."""
    return [_parse(row, where) for where, row in
            read_table(path, COLUMNS, name or str(path), "labmagic.benchmark.write_back.COLUMNS")]


def _parse(row: dict, where: str) -> dict:
    for col in _COUNTS:
        if not row[col].isdigit() or int(row[col]) < 1:
            raise LabError(f"{where}: {col} is {row[col]!r}, not a positive count")
        row[col] = int(row[col])
    for col in _TIMES + _DIFFERENCES:
        text = row[col]
        if text == "" and col in _DIFFERENCES[1:]:
            row[col] = None
            continue
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or (col in _TIMES and value < 0):
            raise LabError(f"{where}: {col} is {text!r}, not a time")
        row[col] = value
    return row
