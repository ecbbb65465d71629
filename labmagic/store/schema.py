"""The bench CSV's schema, written once: its columns and their types, the statuses a row may have, its key,
the shape key, and the values a row may hold.

Every writer (:func:`labmagic.bench` through :mod:`labmagic.store.bench_csv`) and every reader (plots,
the Results page, ``labmagic results``) uses these names. :class:`Row` is the schema: its fields, in order, are
the measurement columns and their types; :data:`PROVENANCE_FIELDS` follow. A reader accepts nothing that no
writer produces: :func:`row_problem` is the rule, and :func:`labmagic.store.bench_csv.write_rows` applies it to
what it writes as :mod:`labmagic.store.catalog` applies it to what it reads.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from ..errors import shown
from ..paths import CHAPTER_NAME, MAX_NAME, VARIANT_NAME

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
    ms_ci_low: float | None = None  # the median's 95% interval (labmagic.timing.noise), over the `samples` timed calls
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
    # The chapter's source hash when the row was measured (labmagic.store.fingerprint.chapter_hash of its notebook
    # and headers): the row is current while the chapter still hashes to it, whether or not its sweep finished.
    chapter_hash: str = ""

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
    [c for c in COLUMNS if c != "chapter_hash"],
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


def format_row(row: Mapping) -> dict[str, str]:
    """A row's cells as the CSV writes them: :func:`format_cell`, and the free text (:data:`FREE_TEXT`) as
    :func:`plain_text` makes it. Names, statuses and shapes are left as they are, for :func:`row_problem` to judge."""
    return {name: plain_text(format_cell(value)) if name in FREE_TEXT else format_cell(value)
            for name, value in row.items()}


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


# -- the values a row may hold ----------------------------------------------------------------------------------

#: The longest time a row may carry, in milliseconds: one day. A row's median is of at least 10 timed calls after
#: at least 3 warm-up calls (:class:`labmagic.timing.CudaTimer`'s defaults), so a call of a day would hold one race
#: at one shape for about two weeks; the slowest row the book has measured took 0.3 s. Anything beyond is a corrupt
#: or forged cell, and a bound keeps every time the page prints to a few digits (1e308 would print 309).
MAX_MS = 86_400_000.0

#: The longest text a cell may hold: a version, a GPU's name, one error message (the runner cuts an exception's
#: text to 300 characters). Writers cut longer text to this (:func:`plain_text`).
MAX_TEXT = 2000

#: The time columns: more than 0 and at most :data:`MAX_MS` on an ``ok`` row, which the page and ``--compare``
#: show as timings.
TIMES = ("ms_median", "ms_min", "ms_max", "ms_ci_low", "ms_ci_high")

#: Text columns that hold what a run found (versions, a GPU's name, an error message), not names the page checks.
FREE_TEXT = frozenset(c for c in COLUMNS if TYPES.get(c, str) is str) - {"chapter", "variant", "status", "shape"}

#: What :func:`shape_str` writes.
SHAPE_KEY = re.compile(rf"[0-9]{{1,19}}(?:x[0-9]{{1,19}}){{0,{MAX_NAME // 2}}}")

#: A number as the writers write one (``str(int)``, ``f"{float:.6g}"``).
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")

#: Unicode categories no cell holds: control characters (but tab and line breaks, which an error message may
#: carry), format characters (the right-to-left override U+202E and the other bidirectional controls, zero-width
#: characters), surrogates, line and paragraph separators. Each can make a value read as another, or act on a
#: terminal.
_UNSHOWN = {"Cc", "Cf", "Cs", "Zl", "Zp"}
_ALLOWED_CONTROLS = "\t\n\r"


def _unshown(c: str) -> bool:
    return c not in _ALLOWED_CONTROLS and unicodedata.category(c) in _UNSHOWN


def plain_text(value: str) -> str:
    """Text as a writer stores it: each control or format character written as its escape (``\\u202e``), cut to
    :data:`MAX_TEXT` characters (an exception's message is the data a writer does not choose)."""
    if any(_unshown(c) for c in value):
        value = "".join(repr(c)[1:-1] if _unshown(c) else c for c in value)
    return value if len(value) <= MAX_TEXT else value[: MAX_TEXT - 3] + "..."


def _number_problem(name: str, text: str, status: str) -> str | None:
    try:
        number = float(text)
    except ValueError:
        return f"{name} is {shown(text)}, not a number"
    if math.isfinite(number) and not _NUMBER.fullmatch(text):  # float() also takes "1_000" and " 1"
        return f"{name} is {shown(text)}, not a number"
    if name in TIMES and status == OK and not 0 < number <= MAX_MS:
        return (f"{name} is {shown(text)} on an ok row: a time is more than 0 and at most {MAX_MS:.0f} ms "
                f"(a day)")
    if name == "err_over_tol" and number == math.inf and status != OK:
        return None  # a mismatch whose output held NaN/inf (labmagic.benchmark.checks)
    if not math.isfinite(number):
        return f"{name} is {shown(text)}, not a finite number"
    if number < 0:
        return f"{name} is {shown(text)}, below zero (no column of a bench row is negative)"
    if TYPES[name] is int and not number.is_integer():
        return f"{name} is {shown(text)}, not a whole number"
    return None


def row_problem(cells: Mapping[str, str]) -> str | None:
    """Why one bench CSV line's cells (text, as the file holds them; a column not given is empty) are not a row
    that a writer produces, in words that follow a file and line; None when they are one.

    Names are checked, not escaped: chapter and variant are :data:`~labmagic.paths.CHAPTER_NAME` and
    :data:`~labmagic.paths.VARIANT_NAME` (ASCII, at most :data:`~labmagic.paths.MAX_NAME` characters), the status
    is one of :data:`STATUSES` and the shape a :func:`shape_str`. Numbers are finite and not negative, times on an
    ``ok`` row more than 0 and at most :data:`MAX_MS`. Other text is at most :data:`MAX_TEXT` characters without
    control or bidirectional-format characters (the page escapes its markup).
    """
    def cell(name: str) -> str:
        value = cells.get(name)
        return "" if value is None else str(value)

    status = cell("status")
    if status not in STATUSES:
        return f"status {shown(status)} is not one of {', '.join(STATUSES)}"
    if not CHAPTER_NAME.fullmatch(cell("chapter")):
        return (f"chapter {shown(cell('chapter'))} is not a chapter name (lower-case letters, digits and "
                f"underscores, at most {MAX_NAME})")
    if not VARIANT_NAME.fullmatch(cell("variant")):
        return (f"variant {shown(cell('variant'))} is not a variant name (letters, digits and underscores, not "
                f"starting with a digit, at most {MAX_NAME})")
    if not SHAPE_KEY.fullmatch(cell("shape")):
        return f"shape {shown(cell('shape'))} is not a shape key (whole numbers joined by 'x', like 4096x4096)"
    for name in COLUMNS:
        text = cell(name)
        if not text:
            continue
        kind = TYPES.get(name, str)
        if kind in (float, int):
            problem = _number_problem(name, text, status)
            if problem:
                return problem
        elif kind is bool:
            if text not in ("True", "False"):
                return f"{name} is {shown(text)}, not True or False"
        elif len(text) > MAX_TEXT:
            return f"{name} is {len(text)} characters long (at most {MAX_TEXT})"
        else:
            odd = next((c for c in text if _unshown(c)), None)
            if odd is not None:
                what = unicodedata.name(odd, "a control character")
                return (f"{name} {shown(text)} holds U+{ord(odd):04X} ({what}): no cell holds control or format "
                        "characters, which can make text read as other text")
    return None
