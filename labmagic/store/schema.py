"""The bench CSV's schema, written once: its columns and their types, the statuses a row may have, its key,
and the shape key.

Every writer (:func:`labmagic.bench` through :mod:`labmagic.store.bench_csv`) and every reader (plots,
the Results page, ``labmagic results``) uses these names. :class:`Row` is the schema: its fields, in order, are
the measurement columns and their types; :data:`PROVENANCE_FIELDS` follow. A reader accepts nothing that no
writer produces.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

#: Statuses a row can have (the CSV's ``status`` column).
OK, MISMATCH, ERROR, OOM, SKIPPED, NEEDS_GPU, PREDICTED = (
    "ok", "mismatch", "error", "oom", "skipped", "needs_gpu", "predicted")
STATUSES = (OK, MISMATCH, ERROR, OOM, SKIPPED, NEEDS_GPU, PREDICTED)


@dataclass
class Row:
    """One variant at one shape: a line of the table and of the CSV."""

    chapter: str
    variant: str
    backend: str
    shape: str
    dtype: str
    status: str
    flops: float | None = None
    nbytes: float | None = None
    ms_median: float | None = None
    ms_min: float | None = None
    ms_max: float | None = None
    ms_ci_low: float | None = None  # the median's 95% interval (labmagic.noise), over the `samples` timed calls
    ms_ci_high: float | None = None
    samples: int | None = None
    # One eager call, timed on the host (labmagic.timing.time_host): its median time from the Python call to its
    # return, the GPU not awaited, and its isolated latency, synchronized before and after. Where host_ms exceeds
    # ms_median the row is host-bound: in an eager loop the host, not the kernel, sets the pace.
    host_ms: float | None = None
    isolated_ms: float | None = None
    tflops: float | None = None
    gbps: float | None = None
    sol_pct: float | None = None
    ceiling_pct: float | None = None
    vs_ref: float | None = None
    vs_ref_low: float | None = None  # vs_ref's interval: 1.00 inside it means "no difference in this run"
    vs_ref_high: float | None = None
    predicted_ms: float | None = None
    below_floor: bool = False
    peak_mem_bytes: int | None = None
    alloc_retries: int = 0
    sdpa_backend: str = "-"
    # The check's worst |out - ref| / (atol + rtol |ref|) (labmagic.benchmark.checks): pass at or below 1.
    err_over_tol: float | None = None
    timer: str = "-"
    error: str = ""
    source_hash: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def host_bound(self) -> bool:
        return host_bound(self.host_ms, self.ms_median)


def host_bound(host_ms, ms_median) -> bool:
    """Whether one eager call's host time (``host_ms``) exceeds its device time (``ms_median``): False unless both
    were measured (an empty cell, None or NaN, is no evidence)."""
    try:
        return float(host_ms) > float(ms_median)  # NaN compares False
    except (TypeError, ValueError):
        return False


#: Where and with what a row was measured (:func:`labmagic.benchmark.provenance.collect`), in CSV order.
PROVENANCE_FIELDS = ["gpu", "driver", "cuda", "torch", "triton", "jax", "git_commit", "timestamp"]

#: Every bench CSV has exactly these columns, in this order.
COLUMNS = [f.name for f in fields(Row)] + PROVENANCE_FIELDS

#: The header before the host-time columns, when the check's error was a relative one (``max_rel_err``).
_BEFORE_HOST_TIME = [
    "chapter", "variant", "backend", "shape", "dtype", "status", "flops", "nbytes", "ms_median", "ms_min", "ms_max",
    "ms_ci_low", "ms_ci_high", "samples", "tflops", "gbps", "sol_pct", "ceiling_pct", "vs_ref", "vs_ref_low",
    "vs_ref_high", "predicted_ms", "below_floor", "peak_mem_bytes", "alloc_retries", "sdpa_backend", "max_rel_err",
    "timer", "error", "source_hash", *PROVENANCE_FIELDS]

#: Headers that earlier versions wrote, oldest first. Readers take such a CSV column by column: what it lacks reads
#: empty (nothing is invented for rows measured without it), and a column that no longer exists is not read
#: (``max_rel_err``, a relative error, is not the ``err_over_tol`` that replaced it, and cannot be turned into it).
#: ``labmagic results --upgrade`` rewrites such a CSV with :data:`COLUMNS`.
EARLIER_COLUMNS = [
    [c for c in _BEFORE_HOST_TIME if c not in ("ms_ci_low", "ms_ci_high", "samples", "vs_ref_low", "vs_ref_high")],
    _BEFORE_HOST_TIME,
]

#: A row is identified by these; a new row replaces an old one with the same key.
KEY = ("chapter", "variant", "shape", "dtype")

#: Column -> the Python type its text stands for (the rest are text).
TYPES: dict[str, type] = {
    f.name: next(t for name, t in (("bool", bool), ("float", float), ("int", int), ("str", str))
                 if str(f.type).startswith(name))
    for f in fields(Row)
}
NUMERIC = tuple(name for name, kind in TYPES.items() if kind in (float, int))


def format_cell(value) -> str:
    """A value as the CSV writes it: '' for None and NaN, 6 significant digits for floats."""
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if value != value else f"{value:.6g}"
    return str(value)


def parse_cell(name: str, text: str | None):
    """A CSV cell back to its column's type (the inverse of :func:`format_cell`)."""
    kind = TYPES.get(name, str)
    if kind is bool:
        return text == "True"
    if kind is float:
        return float(text) if text not in ("", None) else None
    if kind is int:
        if name == "alloc_retries":
            return int(float(text or 0))
        return int(float(text)) if text not in ("", None) else None
    return text


def row_from_cells(cells: dict[str, str]) -> Row:
    """A :class:`Row` from one CSV line's cells (provenance columns are not part of a Row)."""
    return Row(**{f.name: parse_cell(f.name, cells[f.name]) for f in fields(Row) if f.name in cells})


# -- the shape key ---------------------------------------------------------------------------------------------

def shape_tuple(value) -> tuple[int, ...]:
    """A race's shape as a tuple of ints: ``4096`` -> ``(4096,)``, ``[64, 128]`` -> ``(64, 128)``."""
    if isinstance(value, int):
        return (value,)
    return tuple(int(v) for v in value)


def shape_str(shape: Sequence[int]) -> str:
    """``(4096, 4096)`` -> ``"4096x4096"`` (the CSV's shape key)."""
    return "x".join(str(int(s)) for s in shape)


def shape_dims(shape) -> list[int]:
    """The CSV's shape key back: ``"32768x8192"`` -> ``[32768, 8192]``; ``[]`` for one that is not a product of
    integers."""
    try:
        return [int(part) for part in str(shape).split("x")]
    except ValueError:
        return []


def shape_size(shape) -> int:
    """Elements of a CSV shape key (``"32768x8192"`` -> 268435456); 0 when it is not one."""
    dims = shape_dims(shape)
    return math.prod(dims) if dims else 0
