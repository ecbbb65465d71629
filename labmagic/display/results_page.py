"""The book's Results page, and the README's and front page's generated tables, drawn from
``results/<gpu>/bench/<chapter>.csv``.

Nothing here measures or writes CSVs: it reads the catalog (:mod:`labmagic.store.catalog`), marks stale rows
(:mod:`labmagic.store.staleness`), judges each row's floor again (:func:`with_floor`) and renders MyST Markdown.
:mod:`labmagic.sphinx.fill_results` puts the page into ``book/results.md`` and the headline
(:mod:`labmagic.display.chapters`) onto ``book/intro.md`` at build time, so the published tables are always the data
in ``results/``, never typed by hand. Each GPU's section shows, per dtype, the shape once in a heading (its axes
named) and a table that fits the page; the other columns and every other shape fold into a dropdown.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd

from ..benchmark import roofline
from ..errors import LabError
from ..store.catalog import check_inside_results, distinct, load, measured_ok
from ..store.schema import OK, OOM, host_bound, shape_dims, shape_size
from ..store.staleness import with_staleness
from ..timing.noise import includes_one
from . import chapters
from .markdown import Markup, md_table, text
from .race_table import HOST_BOUND, SAME_AS_REF
from .units import cell_number

#: Provenance columns and how the page labels them.
PROVENANCE_LABELS = {"gpu": "GPU", "driver": "driver", "cuda": "CUDA", "torch": "torch", "triton": "triton",
                     "jax": "jax", "git_commit": "commit"}

#: A plot beside a bench CSV: its name goes into a link, so it is plain (no spaces, brackets or quotes).
PLOT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\.png")


def _num(value, digits=3, suffix=""):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    try:
        value = float(value)
    except (TypeError, ValueError):
        return str(value)
    if value == 0:
        return f"0{suffix}"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    return f"{value:,.{decimals}f}{suffix}"


#: What ``-`` in a provenance column means (:func:`labmagic.benchmark.provenance.collect` writes it when it cannot
#: find the value); a column missing here reads "not recorded".
DASH_MEANS = {"git_commit": "not recorded (the run had no git checkout)", "torch": "not installed",
              "triton": "not installed", "jax": "not installed"}


def _short_commit(commit: str) -> str:
    """The hash cut to 10 characters, keeping a ``-dirty`` mark (the writer's ``--short=12`` plus ``-dirty``)."""
    head, sep, rest = commit.partition("-")
    return head[:10] + sep + rest


def _unrecorded(rows: pd.DataFrame, col: str) -> tuple[int, str]:
    """How many rows hold no value in ``col`` ('-', empty or absent), and what that means."""
    if col not in rows.columns:
        return len(rows), "not recorded"
    cells = rows[col].astype(str).str.strip()
    blank = cells.isin(["", "nan", "None", "<NA>"]) | rows[col].isna()
    dashes = int((cells == "-").sum())
    missing = dashes + int(blank.sum())
    meaning = DASH_MEANS.get(col, "not recorded") if dashes == missing and dashes else "not recorded"
    return missing, meaning


def provenance(rows: pd.DataFrame) -> str:
    """One line: GPU, driver, CUDA, library versions, commit(s), date(s); every value as text.

    A column no row recorded says so (and why, where ``-`` has one meaning); one that some rows recorded lists
    those values and counts the rest."""
    parts = []
    for col, label in PROVENANCE_LABELS.items():
        values = distinct(rows, col)
        if col == "git_commit":
            values = sorted(dict.fromkeys(_short_commit(v) for v in values))
        missing, meaning = _unrecorded(rows, col)
        if not values:
            parts.append(f"**{label}** {meaning}")
            continue
        shown = text(", ".join(values))
        if missing:
            shown += f"; {missing} of {len(rows)} rows: {meaning}"
        parts.append(f"**{label}** {shown}")
    stamps = sorted(v[:10] for v in distinct(rows, "timestamp"))
    if stamps:
        parts.append(f"**date** {text(stamps[0])}" + (f" to {text(stamps[-1])}" if stamps[-1] != stamps[0] else ""))
    else:
        parts.append("**date** not recorded")
    return " · ".join(parts)




def with_floor(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with ``below_floor`` judged again: a row is flagged when its median is faster than the physical floor,
    the spec sheet of the GPU its folder names (:func:`labmagic.benchmark.roofline.floor_ms`). The CSV's own flag is
    not trusted: an earlier labmagic judged against the measured ceiling, and flagged kernels that beat cuBLAS."""
    if df.empty:
        return df
    flags = []
    for _, row in df.iterrows():
        floor = roofline.floor_ms(roofline.find_spec(str(row.get("gpu_slug"))), str(row.get("dtype")),
                                  cell_number(row.get("flops")), cell_number(row.get("nbytes")))
        flags.append(roofline.below_floor(cell_number(row.get("ms_median")), floor))
    df["below_floor"] = flags
    return df


def catalog(root: Path) -> pd.DataFrame:
    """Every row under ``root``'s ``results/``, with its ``stale`` reason and its floor judged again."""
    return with_floor(with_staleness(load(root), root))


def _status_or(row, measured):
    status = str(row.get("status", OK))
    return measured if status.lower() == OK else status.upper() if status.lower() == OOM else status


def _notes(row) -> Markup:
    notes = []
    if row.get("stale"):
        notes.append("**stale**")
    if str(row.get("below_floor")) == "True":
        notes.append("**below the physical floor: suspect**")
    if host_bound(row.get("host_ms"), row.get("ms_median")):
        notes.append(HOST_BOUND)
    retries = row.get("alloc_retries")
    if isinstance(retries, (int, float)) and retries == retries and retries > 0:
        notes.append(f"{int(retries)} allocator retries*")
    return Markup(", ".join(notes))


def _vs_ref(row) -> str:
    """``vs ref``, marked when its 95% interval holds 1.00 (no difference from the reference in that run)."""
    tie = includes_one(row.get("vs_ref_low"), row.get("vs_ref_high"))
    return _num(row.get("vs_ref"), 3, "x") + (f"\u00a0{SAME_AS_REF}" if tie else "")  # kept on one line


def _reason(row) -> str:
    """Why a row has no time (a skipped, failed or out-of-memory row keeps its reason), as text."""
    return "" if str(row.get("status", OK)).lower() == OK else str(row.get("error") or "")


def _ahead(row, ceilings) -> str:
    """'ahead of cuBLAS' for a row beyond the measured ceiling (a win)."""
    roof = roofline.measured_roof(ceilings, str(row.get("dtype")))
    memory = bool(roof and roof.memory_bound(cell_number(row.get("flops")), cell_number(row.get("nbytes"))))
    return roofline.ceiling_passed(cell_number(row.get("ceiling_pct")), memory)


def _notes_cell(row, ceilings) -> Markup:
    parts = [_notes(row)] + [Markup(text(p)) for p in (_ahead(row, ceilings), _reason(row)) if p]
    return Markup(", ".join(p for p in parts if p))


def table_shape(rows: pd.DataFrame, chapter: str, dtype: str) -> str:
    """The shape a GPU's table shows for one dtype: the chapter's headline shape where it was measured in that
    dtype, else the largest problem that passed (:func:`headline_shape`), else the largest one tried."""
    this = chapters.rule(chapter)
    shapes = set(rows["shape"].astype(str))
    if this.shape in shapes and this.dtype == dtype:
        return this.shape
    good = rows[measured_ok(rows)]
    return headline_shape(good if not good.empty else rows)


def shape_heading(chapter: str, dtype: str, shape: str) -> str:
    """``**bfloat16**, 4 x 16 x 4096 x 4096 x 128 (B x H x S_q x S_k x D)``: the table's shape, its axes named."""
    axes = chapters.rule(chapter).axes_of(shape)
    dims = " x ".join(str(d) for d in shape_dims(shape)) or str(shape)
    return f"**{text(dtype)}**, {text(dims)}" + (f" ({text(axes)})" if axes else "")


def _host(row) -> str:
    """One eager call's host time and, in brackets, its isolated latency (ms); ``-`` where it was not measured."""
    if _num(row.get("host_ms")) == "-":
        return "-"
    return f"{_num(row.get('host_ms'), 3)} ({_num(row.get('isolated_ms'), 3)})"


def _full_table(rows: pd.DataFrame, ceilings) -> str:
    head = ["variant", "backend", "median ms (min-max)", "GB/s", "TFLOP/s", "% of spec roofline",
            "% of measured ceiling", "vs ref", "host ms (isolated)", "notes"]
    body = []
    for _, row in rows.iterrows():
        notes = _notes_cell(row, ceilings)
        if str(row.get("status", OK)).lower() != OK:
            body.append([row.get("variant", "?"), row.get("backend", "-"), _status_or(row, ""), "-", "-", "-", "-",
                         "-", "-", notes])
            continue
        spread = f"{_num(row.get('ms_median'), 4)} ({_num(row.get('ms_min'), 3)}-{_num(row.get('ms_max'), 3)})"
        body.append([row.get("variant", "?"), row.get("backend", "-"), _status_or(row, spread),
                     _num(row.get("gbps"), 4), _num(row.get("tflops"), 3), _num(row.get("sol_pct"), 3, "%"),
                     _num(row.get("ceiling_pct"), 3, "%"), _vs_ref(row), _host(row), notes])
    return md_table(head, body)


def _latency_table(rows: pd.DataFrame) -> str:
    shapes = sorted(rows["shape"].dropna().astype(str).unique(), key=shape_size)
    latency = []
    for variant, vrows in rows.groupby("variant", sort=False):
        by_shape = {str(r["shape"]): _status_or(r, _num(r.get("ms_median"), 3)) for _, r in vrows.iterrows()}
        latency.append([variant] + [by_shape.get(s, "") for s in shapes])
    return md_table(["variant"] + shapes, latency)


def dtype_table(rows: pd.DataFrame, chapter: str, dtype: str, ceilings=None) -> str:
    """One dtype's rows on one GPU: the shape and dtype once in a heading, then a table that fits the page
    (variant, time, the bounding throughput, % of ceiling, vs the race's reference, notes), then every column and
    every shape folded in a dropdown."""
    shape = table_shape(rows, chapter, dtype)
    at = rows[rows["shape"].astype(str) == shape]
    good = at[measured_ok(at)]
    spec = roofline.find_spec(str(at["gpu_slug"].iloc[0])) if "gpu_slug" in at.columns and len(at) else None
    unit = chapters.per_second(good.iloc[0], spec)[1] if not good.empty else "GB/s"
    measured = "ceiling_pct" in at.columns and at["ceiling_pct"].notna().any()
    pct_head, pct_col = ("% of measured ceiling", "ceiling_pct") if measured else ("% of spec", "sol_pct")
    refs = chapters.race_references(at)
    body = []
    for _, row in at.iterrows():
        notes = _notes_cell(row, ceilings)
        if str(row.get("status", OK)).lower() != OK:
            body.append([row.get("variant", "?"), _status_or(row, ""), "-", "-", "-", notes])
            continue
        value = _num(row.get("gbps" if unit == "GB/s" else "tflops"), 4)
        body.append([row.get("variant", "?"), _num(row.get("ms_median"), 4), value,
                     _num(row.get(pct_col), 3, "%"), _vs_ref(row), notes])
    out = [shape_heading(chapter, dtype, shape), "",
           md_table(["variant", "median ms", unit, pct_head, f"vs {refs[0]}" if len(refs) == 1 else "vs ref", "notes"],
                    body)]
    if len(refs) > 1:
        out += ["", f"vs ref: each row against its own race's reference ({text(', '.join(refs))})."]
    if any(SAME_AS_REF in str(line[4]) for line in body):
        out += ["", f"{SAME_AS_REF}: the ratio's 95% interval holds 1.00, no difference from the reference in that "
                    "run."]
    out += ["", ":::{dropdown} Every column, and every shape measured in this dtype", "",
            _full_table(at, ceilings), ""]
    if rows["shape"].nunique() > 1:
        out += ["Median latency (ms) per shape:", "", _latency_table(rows), ""]
    return "\n".join(out + [":::"])


def gpu_table(rows: pd.DataFrame, chapter: str = "", ceilings=None) -> str:
    """A GPU's rows of one chapter: a :func:`dtype_table` per dtype."""
    dtypes = sorted(rows["dtype"].astype(str).unique()) if "dtype" in rows.columns else ["-"]
    return "\n\n".join(dtype_table(rows[rows["dtype"].astype(str) == d], chapter, d, ceilings) for d in dtypes)


def _squareness(shape) -> float:
    """1 for a square shape, smaller the more lopsided: picks 16384x16384 out of a row-length sweep."""
    dims = shape_dims(shape)
    return min(dims) / max(dims) if dims and max(dims) > 0 else 0.0


def headline_shape(rows: pd.DataFrame) -> str:
    """The shape a summary shows for rows of one GPU and dtype: the largest problem measured (a row-length sweep
    keeps the size and varies the shape, so of the shapes of that size, the squarest; of equally square ones, the
    first in sorted order). ``rows`` are rows that passed (:func:`labmagic.store.catalog.measured_ok`)."""
    sizes = rows["shape"].map(shape_size)
    top = sorted(str(s) for s in rows.loc[sizes == sizes.max(), "shape"].unique())
    return max(top, key=_squareness)


def cross_gpu_table(rows: pd.DataFrame) -> str:
    """% of roofline per variant (rows) and per GPU and dtype (columns). A column shows one shape, named in its
    header: that GPU's and dtype's :func:`headline_shape`; a variant that did not pass there shows its status."""
    columns, values = [], {}
    for (slug, dtype), grows in sorted(rows.groupby(["gpu_slug", "dtype"], dropna=False),
                                       key=lambda item: tuple(map(str, item[0]))):
        good = grows[measured_ok(grows)]
        if good.empty:
            continue
        shape = headline_shape(good)
        dtype = str(dtype) if str(dtype) not in ("", "nan") else "-"
        label = f"{slug} {dtype} ({shape})"
        columns.append(label)
        for _, row in grows[grows["shape"].astype(str) == shape].iterrows():
            values.setdefault(row["variant"], {})[label] = _status_or(row, _num(row.get("sol_pct"), 3, "%"))
    if not columns:
        return "No variant was measured successfully on any GPU."
    body = [[variant] + [cols.get(c, "-") for c in columns] for variant, cols in values.items()]
    return md_table(["variant"] + columns, body)


def _plots(root: Path, slug: str, chapter: str) -> list[Path]:
    """The plots beside a chapter's CSV; LabError for one whose name is not plain, that is not a file, or that links
    out of results/ (Sphinx would copy whatever it points to into the site)."""
    plots = sorted((root / "results" / slug / "bench").glob(f"{chapter}*.png"))
    for png in plots:
        if not PLOT_NAME.fullmatch(png.name) or not png.is_file():
            raise LabError(f"{png.relative_to(root).as_posix()!r}: a plot must be a file named with letters, "
                           f"digits, '_', '.' and '-' only")
        check_inside_results(png, root)
    return plots


def _overview(df: pd.DataFrame) -> str:
    rows = []
    for slug, grows in sorted(df.groupby("gpu_slug")):
        stamps = sorted(v[:10] for v in distinct(grows, "timestamp"))
        name = ", ".join(distinct(grows, "gpu")) or slug
        rows.append([Markup(f"{{ref}}`{slug} <results-gpu-{slug}>`"), name,
                     ", ".join(sorted(grows["chapter"].unique())), len(grows),
                     int((grows["stale"] != "").sum()), stamps[-1] if stamps else "-"])
    return md_table(["GPU", "name", "chapters", "rows", "stale rows", "last measured"], rows)


def _stale_warning(rows: pd.DataFrame, chapter: str, slug: str) -> list[str]:
    stale = rows[rows["stale"] != ""]
    if stale.empty:
        return []
    reasons = text("; ".join(sorted(set(stale["stale"]))))
    return ["```{warning}", f"{len(stale)} of {len(rows)} rows are stale ({reasons}). Re-run "
            f"`labmagic sweep {chapter}` on {text(slug)} to refresh them.", "```", ""]


def _gpu_section(root: Path, doc_dir: str, chapter: str, slug: str, rows: pd.DataFrame, ceilings) -> list[str]:
    out = [f"### {text(slug)}", "", f"::::{{container}} lab-gpu lab-gpu-{slug}", provenance(rows), ""]
    out += _stale_warning(rows, chapter, slug)
    out += [gpu_table(rows, chapter, ceilings), ""]
    for png in _plots(root, slug, chapter):
        rel = Path("..") / png.relative_to(root) if doc_dir else png.relative_to(root)
        out += [f"![{text(chapter)} on {text(slug)}: {text(png.stem)}]({rel.as_posix()})", ""]
    return out + ["::::", ""]


def render(root: Path, doc_dir: str = "book") -> str:
    """The generated body of the Results page (MyST Markdown), for the page at ``<root>/<doc_dir>/``.

    Every value from a CSV goes through :func:`~labmagic.display.markdown.text`; GPU slugs and chapter names,
    which also make anchors, classes, links and paths, are checked by :func:`labmagic.store.catalog.load`.
    """
    root = Path(root)
    df = catalog(root)
    if df.empty:
        return ("\n```{note}\nNo results yet: `results/` holds no bench CSVs. Run `labmagic sweep` on a GPU, "
                "then rebuild the book.\n```\n")
    measured = ceilings(root, df)
    out = ["", "## Overview", "", _overview(df), ""]
    first_gpu: set[str] = set()
    for chapter, crows in sorted(df.groupby("chapter")):
        out += [f"## {text(chapter)}", ""]
        if (root / doc_dir / f"{chapter}.ipynb").exists():
            out += [f"Chapter: {{doc}}`{chapter}`", ""]
        for slug, rows in sorted(crows.groupby("gpu_slug")):
            if slug not in first_gpu:  # one anchor per GPU for the overview's links
                out += [f"({'results-gpu-' + slug})=", ""]
                first_gpu.add(slug)
            out += _gpu_section(root, doc_dir, chapter, slug, rows, measured[slug])
        out += ["### Across GPUs", "", "Each variant's % of spec roofline per GPU and dtype, at the largest problem "
                "measured there (of equal sizes, the squarest shape); each column's header names its shape:", "",
                cross_gpu_table(crows), ""]
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------------- README


def ceilings(root: Path, df: pd.DataFrame) -> dict[str, roofline.Ceilings | None]:
    """Each GPU's measured ceilings (``results/<gpu>/ceilings.json``, from ``labmagic calibrate``); None for a GPU
    never calibrated; LabError naming a file that is not a ceilings record."""
    found = {}
    for slug in sorted(set(df["gpu_slug"].astype(str))) if not df.empty else []:
        path = Path(root) / "results" / slug / "ceilings.json"
        if path.exists():
            check_inside_results(path, root)
        try:
            found[slug] = roofline.load_ceilings(slug, path)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise LabError(f"results/{slug}/ceilings.json: not a ceilings record ({type(exc).__name__})") from None
    return found


def headline_markdown(root: Path, *, link: bool = False) -> str:
    """The headline table (:mod:`labmagic.display.chapters`) over ``root``'s results."""
    df = catalog(root)
    return chapters.headline_markdown(chapters.headline_rows(df, ceilings(root, df)), link=Path(root) if link else None)


def readme_blocks(root: Path) -> dict[tuple[str, str], str]:
    """The README's generated blocks, by their (begin, end) markers: the headline and the chapter table."""
    return {(chapters.HEADLINE_BEGIN, chapters.HEADLINE_END): headline_markdown(root),
            (chapters.CHAPTERS_BEGIN, chapters.CHAPTERS_END): chapters.chapters_markdown(root)}
