"""Every measurement ``results/`` holds, as one DataFrame: each ``results/<gpu>/bench/<chapter>.csv`` read with the
schema's types, with the GPU slug and chapter taken from the path (a stray column value does not move a row).

CSVs arrive from other machines and pull requests, so nothing in one is trusted: a file whose header is not the
schema's (or an earlier labmagic's, :data:`~labmagic.store.schema.EARLIER_COLUMNS`), a line that is not one row of it,
a value that no writer writes (the writers' own rule, :func:`labmagic.store.schema.row_problem`: a time that is not
a positive, finite number of milliseconds on an ``ok`` row, a variant that is not a variant name, text with control
or bidirectional-format characters, a value too long), or a folder or file name that is not a device slug or a
chapter name is refused with a :class:`~labmagic.errors.LabError` naming the file (and line), never skipped: a
Results page missing a chapter without a word is a wrong answer, and one showing a forged row is worse. A header
that an earlier labmagic wrote is read column by column, the columns it lacks empty, so the rows of an older sweep,
or of an older revision (``labmagic results --compare``), still read as what they are.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pandas as pd

from ..errors import LabError
from ..paths import CHAPTER_NAME
from .schema import COLUMNS, EARLIER_COLUMNS, NUMERIC, OK, row_problem

#: A GPU's folder under ``results/`` (what :func:`labmagic.runtime.device_slug` makes): the page uses it in anchors,
#: CSS classes and paths, so nothing else is accepted.
SLUG = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


def csv_paths(root: Path) -> list[Path]:
    return sorted(Path(root).glob("results/*/bench/*.csv"))


def check_names(path: Path) -> tuple[str, str]:
    """(GPU slug, chapter) of ``results/<slug>/bench/<chapter>.csv``; LabError when either is not one (the names
    are quoted: a crafted one must not break the error's line either)."""
    slug, chapter = path.parent.parent.name, path.stem
    if not SLUG.fullmatch(slug):
        raise LabError(f"results/ holds a GPU folder {slug!r} that is not a device slug (lower-case letters and "
                       f"digits, joined by single dashes, as `labmagic sweep` names it)")
    # The page heads and links with the CSV's stem, so it is held to the rule its writers follow.
    if not CHAPTER_NAME.fullmatch(chapter):
        raise LabError(f"results/{slug}/bench/ holds {path.name!r}: {chapter!r} is not a chapter name (lower-case "
                       f"letters, digits and underscores, like 01_vector_add)")
    return slug, chapter


def check_inside_results(path: Path, root: Path) -> None:
    """LabError unless ``path`` resolves inside ``<root>/results``: a link out of it would put any file of the
    machine that builds the book (its content, or a line of it in an error) into the published site."""
    if not Path(path).resolve().is_relative_to((Path(root) / "results").resolve()):
        raise LabError(f"{Path(path).relative_to(root).as_posix()!r} links out of results/: results are plain files")


def _check_header(header: list[str] | None, name: str) -> list[int | None] | None:
    """None for today's header; for an earlier one, the index in it of each of :data:`COLUMNS` (None where it lacks
    that column); LabError for a header that is neither."""
    if header == COLUMNS:
        return None
    if header in EARLIER_COLUMNS:
        return [header.index(c) if c in header else None for c in COLUMNS]
    if not header:
        raise LabError(f"{name}: empty: a bench CSV starts with the header labmagic.store.schema.COLUMNS")
    missing = [c for c in COLUMNS if c not in header]
    unexpected = [c for c in header if c not in COLUMNS]
    what = "; ".join(part for part in (f"missing {', '.join(missing)}" if missing else "",
                                       f"unexpected {', '.join(map(repr, unexpected))}" if unexpected else "")
                     if part) or "its columns in another order"
    raise LabError(f"{name}: the header is not labmagic.store.schema.COLUMNS ({what})")


def _records(handle, name: str) -> list[list[str]]:
    """The rows below the header, each as :data:`COLUMNS` (empty where an earlier header lacks one); LabError at
    the first line that is not a row a writer writes, numbered as the file's lines (a quoted field may span lines)."""
    reader = csv.reader(handle, strict=True)
    line = 1
    records = []
    try:
        header = next(reader, None)
        at = _check_header(header, name)
        line = reader.line_num + 1
        for record in reader:
            if record:  # a blank line holds no row
                if len(record) != len(header):
                    raise LabError(f"{name}, line {line}: {len(record)} fields where the header has {len(header)}")
                mapped = record if at is None else ["" if i is None else record[i] for i in at]
                problem = row_problem(dict(zip(COLUMNS, mapped)))
                if problem:
                    raise LabError(f"{name}, line {line}: {problem}")
                records.append(mapped)
            line = reader.line_num + 1
    except csv.Error as exc:
        raise LabError(f"{name}, line {line}: not a CSV row ({exc})") from None
    except UnicodeDecodeError:
        raise LabError(f"{name}, line {line}: not UTF-8 text") from None
    return records


def _with_numbers(frame: pd.DataFrame) -> pd.DataFrame:
    """The numeric columns as numbers (each cell is empty or one: :func:`_records` checked)."""
    for col in NUMERIC:
        frame[col] = pd.to_numeric(frame[col], errors="coerce")
    return frame


def read_bench_csv(path: Path, root: Path) -> pd.DataFrame:
    """One bench CSV with ``gpu_slug``, ``chapter`` and ``csv`` (its path under ``root``); LabError for anything
    that is not the schema's CSV, naming the file and the line."""
    check_inside_results(path, root)
    with open(path, newline="", encoding="utf-8") as handle:
        return parse_bench_csv(handle, path.relative_to(root))


def parse_bench_csv(handle, name: Path) -> pd.DataFrame:
    """The rows of an open bench CSV (a file, or text from another revision) whose path under the checkout is
    ``name``; the same checks as :func:`read_bench_csv`, with the GPU and chapter taken from ``name``."""
    slug, chapter = check_names(Path(name))
    name = Path(name).as_posix()
    records = _records(handle, name)
    frame = pd.DataFrame(records, columns=COLUMNS, dtype=str)  # text first: versions like 0.10 stay text
    frame = _with_numbers(frame)
    return frame.assign(gpu_slug=slug, chapter=chapter, csv=name)


def load(root: Path) -> pd.DataFrame:
    """Every row of every ``results/*/bench/*.csv``, with ``gpu_slug``, ``chapter`` and ``csv`` (its path)."""
    root = Path(root)
    frames = [read_bench_csv(path, root) for path in csv_paths(root)]
    if not frames:
        return pd.DataFrame(columns=["gpu_slug", "chapter", "variant", "shape", "status", "csv"])
    return pd.concat(frames, ignore_index=True)


def measured_ok(df: pd.DataFrame) -> pd.Series:
    """Rows that passed and carry a time."""
    status = df["status"].astype(str).str.lower() if "status" in df.columns else pd.Series(OK, index=df.index)
    measured = df["ms_median"].notna() if "ms_median" in df.columns else pd.Series(False, index=df.index)
    return (status == OK) & measured


def distinct(rows: pd.DataFrame, col: str) -> list[str]:
    """Distinct non-empty values of a column, sorted (``-`` means not recorded)."""
    if col not in rows.columns:
        return []
    return sorted({str(v) for v in rows[col].dropna()} - {"", "nan", "-"})
