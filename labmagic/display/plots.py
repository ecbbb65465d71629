"""The race's plots: latency (or, for one size in many row lengths, bandwidth against the copy ceiling) and peak
memory against size, and the roofline with this GPU's ceilings.

Drawn with matplotlib's object API (``Figure``, no ``pyplot``), so saving a PNG neither needs nor
changes a GUI backend and works the same in a notebook, papermill and a test.

The figure is sized for the book's text column (784 px): 7.8 inches wide at 110 dpi, so it is shown at about its
own size and an 8 pt label stays 8 pt. Two panels sit on top (latency, roofline), peak memory below, and the
legend has the fourth quarter to itself, so sixteen variants cover no data. A race of more variants (chapter 07
has 28) keeps the ceilings in that quarter and gets a row of its own under the panels for the variants, four to a
line; the figure grows taller by that row, not narrower.

:func:`race_figure` draws a chapter's own figure from its rows: the panels it names (:class:`Panel`), two across,
each legend one entry per family of variants (at most :data:`MAX_LEGEND`), fonts of 9 pt at the column's width.
:func:`labmagic.display.chapters.race_figure` finds a chapter's rows and panels by its name, for a one-line cell.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..paths import atomic_write
from ..store.schema import Row, shape_dims, shape_size

#: Inches and dots per inch of the saved figure: 780 px wide, so the 784 px column shows it at its own size.
FIGSIZE = (7.8, 6.8)
DPI = 100
#: Smallest font on the figure (ticks, legend), in points at FIGSIZE, and so at the page's size.
MIN_FONT_PT = 9
#: The most variants the legend quarter holds (two columns, the ceilings under them); more get a row of their own
#: under the panels, VARIANT_COLUMNS to a line, each line LEGEND_LINE_IN inches tall.
PANEL_VARIANTS = 16
VARIANT_COLUMNS = 4
LEGEND_LINE_IN = 0.19
#: How the legends are packed: tighter than matplotlib's defaults, so sixteen variants and the ceilings share a
#: quarter of the figure.
_LEGEND_STYLE = dict(fontsize=MIN_FONT_PT, title_fontsize=MIN_FONT_PT + 1, frameon=False, borderaxespad=0,
                     borderpad=0.2, handlelength=1.6, handletextpad=0.5, labelspacing=0.25)

#: Ten qualitative colours (matplotlib's tab10) and seven markers: 10 and 7 are coprime, so the first 70 variants
#: get 70 different (colour, marker) pairs; the line style changes every ten, so two variants of one colour differ
#: in line as well as marker.
_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
            "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
_LINESTYLES = ("-", "-.", ":")
#: The x-axis labels of :func:`x_axis`: one size in many row lengths, or growing sizes.
ROW_LENGTH = "row length (elements)"
PROBLEM_SIZE = "problem size (elements)"
#: The reference every variant is checked and timed against: black, dashed, no palette colour.
_REF_STYLE = {"color": "black", "marker": "*", "linestyle": "--"}


def variant_styles(variants, ref: str | None = None) -> dict[str, dict[str, str]]:
    """variant -> matplotlib ``color``/``marker``/``linestyle``, by the variants' order (the race's): the same
    race gets the same styles in every figure, and no two variants share all three."""
    styles: dict[str, dict[str, str]] = {}
    i = 0
    for name in dict.fromkeys(variants):
        if name == ref:
            styles[name] = dict(_REF_STYLE)
            continue
        styles[name] = {"color": _COLOURS[i % len(_COLOURS)], "marker": _MARKERS[i % len(_MARKERS)],
                        "linestyle": _LINESTYLES[i // len(_COLOURS) % len(_LINESTYLES)]}
        i += 1
    return styles


def _reference(result) -> str | None:
    """The variant the race timed the others against: the one whose every ``vs_ref`` is exactly 1 (its own time
    over itself). The result does not name it, and a variant that only ties the reference does not tie it
    exactly at every shape."""
    ratios: dict[str, set] = {}
    for row in result.rows:
        if row.vs_ref is not None:
            ratios.setdefault(row.variant, set()).add(row.vs_ref)
    return next((name for name, seen in ratios.items() if seen == {1.0}), None)


def x_axis(result) -> tuple[str, dict[str, int]]:
    """The size axis's label and shape key -> x. Problem size in elements, unless each dtype races one size in
    several 2-D-or-more shapes (chapters 03-05: 2^28 elements as 262144x1024 ... 1024x262144), where every point
    would stack at one x: then the row length, the last dimension."""
    timed = [r for r in result.rows if r.ms_median]
    by_dtype: dict[str, set[str]] = {}
    for row in timed:
        by_dtype.setdefault(row.dtype, set()).add(row.shape)
    shapes = {s for group in by_dtype.values() for s in group}
    constant = bool(by_dtype) and all(
        len({shape_size(s) for s in group}) == 1 and all(len(shape_dims(s)) >= 2 for s in group)
        for group in by_dtype.values())
    if constant and len(shapes) > 1:
        return ROW_LENGTH, {s: shape_dims(s)[-1] for s in shapes}
    return PROBLEM_SIZE, {s: shape_size(s) for s in shapes}


def _series(result, xs: dict[str, int]):
    """variant -> list of (x, row) for rows that have a time, in x order."""
    out: dict[str, list] = {}
    for row in result.rows:
        if row.ms_median:
            out.setdefault(row.variant, []).append((xs[row.shape], row))
    for points in out.values():
        points.sort(key=lambda p: p[0])
    return out


def figure(result, variants=None):
    """Latency and roofline on top, peak memory and the legend below (see the module docstring). ``variants``
    fixes the style order (default: the order the rows name them), so a chapter's per-dtype figures agree."""
    from matplotlib.figure import Figure

    xlabel, xs = x_axis(result)
    series = _series(result, xs)
    if len(series) <= PANEL_VARIANTS or len(series) > MAX_LEGEND:  # more than MAX_LEGEND fold into families
        fig = Figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
        axes = fig.subplot_mosaic([["latency", "roofline"], ["memory", "legend"]])
        ax_leg = ax_ceil = axes["legend"]
    else:  # the variants get a row of their own: the figure grows by it
        legend_in = LEGEND_LINE_IN * (-(-len(series) // VARIANT_COLUMNS) + 2.5)  # the lines, the title, margins
        half = FIGSIZE[1] / 2
        fig = Figure(figsize=(FIGSIZE[0], FIGSIZE[1] + legend_in), dpi=DPI, layout="constrained")
        axes = fig.subplot_mosaic([["latency", "roofline"], ["memory", "ceilings"], ["legend", "legend"]],
                                  height_ratios=[half, half, legend_in])
        ax_leg, ax_ceil = axes["legend"], axes["ceilings"]
    ax_t, ax_r, ax_m = axes["latency"], axes["roofline"], axes["memory"]
    # One size in many row lengths (chapters 03-05): every call moves the same bytes, so the first panel shows
    # what the chapter's argument is about, GB/s against the measured copy ceiling, rather than latency.
    by_row = xlabel == ROW_LENGTH
    styles = variant_styles(list(variants or ()) + [r.variant for r in result.rows], _reference(result))
    labels, styles = _folded(series, styles, by_row)
    for name, points in series.items():
        style = dict(styles[name], markersize=4, linewidth=1.2)
        style.update(_THIN if name not in labels else {})
        label = labels.get(name)
        if by_row:
            gb = [(x, r.gbps) for x, r in points if r.gbps]
            ax_t.plot([g[0] for g in gb], [g[1] for g in gb], label=label, **style)
        else:
            ax_t.plot([p[0] for p in points], [p[1].ms_median for p in points], label=label, **style)
        mem = [(x, r.peak_mem_bytes / 2**20) for x, r in points if r.peak_mem_bytes is not None]
        if mem:
            ax_m.plot([m[0] for m in mem], [m[1] for m in mem], label=label, **style)
        roof_pts = [(r.tflops / r.gbps * 1e3, r.tflops) for _, r in points if r.tflops and r.gbps]
        if roof_pts:
            ax_r.plot([p[0] for p in roof_pts], [p[1] for p in roof_pts], label=label, **dict(style, linestyle=""))
    first = ("bandwidth (median)", "GB/s") if by_row else ("latency (median)", "ms")
    for ax, title, ylabel in ((ax_t, *first), (ax_m, "peak extra memory per call", "MiB")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
    roofs = _draw_roofs(ax_r, result)
    if by_row:
        ax_t.set_ylim(bottom=0)
        if result.ceilings:
            copy = result.ceilings.copy_gbps
            roofs.append(ax_t.axhline(copy, color="gray", linestyle="-", linewidth=1.0,
                                      label=f"copy ceiling: {copy:.0f} GB/s"))
            ax_t.set_ylim(top=max(ax_t.get_ylim()[1], 1.05 * copy))
    else:
        ax_t.set_yscale("log")
    ax_r.set_xscale("log")
    ax_r.set_yscale("log")
    ax_r.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax_r.set_ylabel("achieved TFLOP/s")
    ax_r.set_title("roofline")
    for ax in (ax_t, ax_r, ax_m):
        ax.grid(True, which="both", alpha=0.3)
        ax.tick_params(which="both", labelsize=MIN_FONT_PT)
        ax.xaxis.label.set_size(MIN_FONT_PT + 1)
        ax.yaxis.label.set_size(MIN_FONT_PT + 1)
        ax.title.set_size(MIN_FONT_PT + 1)
    _draw_legend(ax_leg, ax_ceil, ax_t, roofs)
    dtypes = sorted({r.dtype for r in result.rows if r.dtype})
    fig.suptitle(f"{result.chapter} on {result.device}" + (f", {dtypes[0]}" if len(dtypes) == 1 else ""),
                 fontsize=MIN_FONT_PT + 2)
    return fig


#: How a variant that its family's legend entry stands for is drawn: thin and faint, in that entry's colour.
_THIN = {"linewidth": 0.7, "alpha": 0.45, "markersize": 2}


def _folded(series, styles, by_row: bool) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """Legend labels and styles: every variant named where there are at most :data:`MAX_LEGEND`; past that, one entry
    a family (backend), its fastest variant at the largest size named for all of them ("cuda_x (+5 cuda)"), the
    others drawn thin in its colour, and families past the eighth as one grey entry."""
    if len(series) <= MAX_LEGEND:
        return {name: name for name in series}, styles
    points = {name: [(x, (r.gbps if by_row else r.ms_median) or 0.0, r) for x, r in pts]
              for name, pts in series.items()}
    kept, left = families(points, lower_is_better=not by_row, most=MAX_LEGEND - 1)
    labels, styles = {}, dict(styles)
    for family, (best, rest) in kept.items():
        labels[best] = family_label(family, best, rest)
        if rest and family in FAMILY_COLOURS and styles[best]["color"] != "black":  # the reference stays black
            styles[best] = dict(styles[best], color=FAMILY_COLOURS[family])
        for variant in rest:
            styles[variant] = dict(styles[variant], color=styles[best]["color"])
    for i, variant in enumerate(left):
        styles[variant] = dict(styles[variant], color=_OTHER_COLOUR)
        if i == 0:
            labels[variant] = leftover_label(left)
    return labels, styles


def _draw_legend(ax, ax_ceilings, ax_variants, roofs) -> None:
    """The variants (two columns past eight, in their quarter; VARIANT_COLUMNS in a row of their own) and the roofs,
    under the variants in the same quarter or in that quarter alone."""
    handles, labels = ax_variants.get_legend_handles_labels()
    kept = [(h, lab) for h, lab in zip(handles, labels) if h not in roofs]  # the copy ceiling goes with the roofs
    handles, labels = [h for h, _ in kept], [lab for _, lab in kept]
    own_row = ax is not ax_ceilings
    for panel in {ax, ax_ceilings}:
        panel.axis("off")
    if handles:
        ncol = VARIANT_COLUMNS if own_row else 1 if len(handles) <= 8 else 2
        top = ax.legend(handles, labels, loc="upper center", ncol=ncol, title="variant", columnspacing=1.0,
                        **_LEGEND_STYLE)
        if not own_row:
            ax.add_artist(top)  # kept when the ceilings' legend replaces it as this panel's legend
    if roofs:
        ax_ceilings.legend(roofs, [h.get_label() for h in roofs], loc="center" if own_row else "lower center",
                           title="ceilings", **_LEGEND_STYLE)


def _draw_roofs(ax, result) -> list:
    """Bandwidth slope and compute ceiling, spec dashed, measured solid; the lines drawn."""
    dtype = result.rows[0].dtype if result.rows else "float32"
    roofs = []
    if result.spec:
        roofs.append(("spec", result.spec.bandwidth_gbps, result.spec.peak_tflops(dtype), "--"))
    if result.ceilings:
        roofs.append(("measured", result.ceilings.bandwidth_gbps, result.ceilings.peak_tflops(dtype), "-"))
    xs = [2.0 ** e for e in range(-6, 13)]
    lines = []
    for label, bw, tf, style in roofs:
        ys = [min(bw * x / 1e3, tf) if tf else bw * x / 1e3 for x in xs]
        lines += ax.plot(xs, ys, style, color="gray",
                         label=f"{label}: {bw:.0f} GB/s" + (f", {tf:g} TFLOP/s" if tf else ""))
    return lines


def png_bytes(result, dpi: int = DPI, variants=None) -> bytes:
    buf = io.BytesIO()
    figure(result, variants).savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def save_png(result, path, variants=None) -> Path:
    """Write the figure to ``path`` atomically."""
    return atomic_write(path, result.png or png_bytes(result, variants=variants))


def save_chapter_pngs(result) -> dict[str, Path]:
    """A chapter's plots next to its CSV: ``<chapter>.png``, or ``<chapter>.<dtype>.png`` per dtype when the
    chapter races several (one figure mixing fp32 and bf16 rows would draw each variant as a zigzag). Each
    variant keeps its style across the dtypes' figures."""
    csv_path = Path(result.csv_path)
    dtypes = sorted({r.dtype for r in result.rows})
    if len(dtypes) <= 1:
        return {d: save_png(result, csv_path.with_suffix(".png")) for d in dtypes}
    csv_path.with_suffix(".png").unlink(missing_ok=True)  # the single-dtype plot this CSV had before
    variants = [r.variant for r in result.rows]
    return {d: save_png(dataclasses.replace(result, rows=[r for r in result.rows if r.dtype == d], png=None),
                        csv_path.with_suffix(f".{d}.png"), variants) for d in dtypes}


# ------------------------------------------------------------------------------------------- a chapter's race figure
#
# The chapter's own figure (chapter 07's prefill and decode panels, say), drawn from its CSV by one call instead of
# sixty lines in a cell. Readable in the book's 784 px column: 7.8 inches at 100 dpi is 780 px, shown at its own
# size, so a 9 pt font stays 9 pt; at most two panels across; each panel's legend holds at most MAX_LEGEND entries,
# one per family of variants (the backend: cuda, triton, pallas, sdpa, ...) naming the family's fastest, drawn
# bold, with the family's other variants drawn thin in the same colour (the Results page lists them all).

#: Width (inches) and resolution of a race figure: 780 px, the book's text column.
RACE_WIDTH_IN = 7.8
RACE_DPI = 100
#: Smallest font on a race figure (ticks, legends), in points at the page's size.
RACE_FONT_PT = 9
#: Most entries in a panel's legend (families, the ceiling line included).
MAX_LEGEND = 8
#: Height of one row of panels (inches), and of one legend line under it.
PANEL_HEIGHT_IN = 2.9
LEGEND_LINE_HEIGHT_IN = 0.2

#: A family's colour: the book's kernels blue, the libraries they race red and black, the DSLs after them.
FAMILY_COLOURS = {"cuda": "#1f77b4", "triton": "#ff7f0e", "pallas": "#2ca02c", "sdpa": "#d62728",
                  "torch": "#444444", "cublas": "#8c564b", "gluon": "#9467bd", "helion": "#e377c2",
                  "tilelang": "#bcbd22", "cutedsl": "#17becf"}
_OTHER_COLOUR = "#999999"


@dataclass(frozen=True)
class Panel:
    """One panel of a race figure: which rows it draws, and against what.

    ``x`` is an axis of the chapter's shapes by name (``"S_q"``), a function of the named axes (``lambda d: d["B"] *
    d["S_k"]``), ``"last"`` (the last dimension: a row's length) or ``"size"`` (elements); ``y`` a row's column
    (``tflops``, ``gbps``; ``ms_median`` is drawn on a log scale, lower is better); ``keep(dims, row)`` picks the
    rows; ``ceiling`` draws this GPU's measured copy bandwidth as a level line (for a GB/s panel)."""

    title: str
    x: str | Callable[[dict[str, int]], float] = "size"
    y: str = "tflops"
    xlabel: str = ""
    keep: Callable[[dict[str, int], Row], bool] | None = None
    ceiling: bool = False


_Y_LABELS = {"tflops": "TFLOP/s", "gbps": "GB/s", "ms_median": "median ms"}


@dataclass
class RaceFigure:
    """A chapter's race figure, or why there is none; shows itself as a PNG in a notebook."""

    title: str
    figure: Any = None
    message: str = ""

    def png(self) -> bytes:
        buf = io.BytesIO()
        self.figure.savefig(buf, format="png", dpi=RACE_DPI)
        return buf.getvalue()

    def _repr_png_(self):
        return self.png() if self.figure is not None else None

    def __repr__(self) -> str:
        if self.figure is None:
            return self.message
        return f"{self.title}: " + "; ".join(ax.get_title() for ax in self.figure.axes if ax.get_title())


def _dims(row: Row, axes: Mapping[int, Sequence[str]]) -> dict[str, int]:
    """The row's shape by the names of its axes (``{"B": 4, "H": 16, ...}``), by position (``d0``, ``d1``...), its
    ``last`` dimension (a row's length) and its ``size`` in elements."""
    dims = shape_dims(row.shape)
    named = dict(zip(axes.get(len(dims), ()), dims))
    return {**{f"d{i}": d for i, d in enumerate(dims)}, **named, "last": dims[-1] if dims else 0,
            "size": shape_size(row.shape)}


def _x(panel: Panel, dims: dict[str, int]) -> float:
    return panel.x(dims) if callable(panel.x) else dims[panel.x]


def _panel_points(rows: list[Row], panel: Panel, axes: Mapping[int, Sequence[str]]
                  ) -> dict[str, list[tuple[float, float, Row]]]:
    """variant -> (x, y, row) of the rows the panel keeps that passed with a time, in x order."""
    found: dict[str, list[tuple[float, float, Row]]] = {}
    for row in rows:
        if row.status != "ok" or not row.ms_median or row.below_floor:
            continue
        dims = _dims(row, axes)
        if panel.keep is not None and not panel.keep(dims, row):
            continue
        y = getattr(row, panel.y, None)
        if y is None or y != y:
            continue
        found.setdefault(row.variant, []).append((_x(panel, dims), y, row))
    for points in found.values():
        points.sort(key=lambda p: p[0])
    return found


def families(points: dict[str, list[tuple[float, float, Row]]], lower_is_better: bool = False,
             most: int = MAX_LEGEND) -> tuple[dict[str, tuple[str, list[str]]], list[str]]:
    """The panel's families (backends), at most ``most``: family -> (its fastest variant at the largest size it
    reached, its other variants), best family first; and the variants of the families left over."""
    by_family: dict[str, list[str]] = {}
    for variant, pts in points.items():
        by_family.setdefault(pts[0][2].backend, []).append(variant)

    def score(variant):  # the largest x reached, then the value there
        x, y, _ = points[variant][-1]
        return (x, -y if lower_is_better else y)

    ranked = []
    for family, variants in by_family.items():
        best = max(variants, key=score)
        ranked.append((score(best), family, best, sorted(v for v in variants if v != best)))
    ranked.sort(key=lambda item: item[0], reverse=True)
    kept = {family: (best, rest) for _, family, best, rest in ranked[:most]}
    left = sorted(v for _, _, best, rest in ranked[most:] for v in [best, *rest])
    return kept, left


def family_label(family: str, best: str, rest: list[str]) -> str:
    """A family's legend entry: its fastest variant, and how many more of the family its thin lines are."""
    return best + (f" (+{len(rest)} {family})" if rest else "")


def leftover_label(left: list[str]) -> str:
    """The one grey entry for the variants of the families past the legend's room."""
    return f"{len(left)} more variant{'s' if len(left) > 1 else ''}"


def _draw_panel(ax, panel: Panel, points, ceilings) -> None:
    lower = panel.y == "ms_median"
    room = MAX_LEGEND - (1 if panel.ceiling and ceilings else 0)
    kept, left = families(points, lower, room if len({p[0][2].backend for p in points.values()}) <= room
                          else room - 1)
    palette = dict(FAMILY_COLOURS)
    for family, (best, rest) in kept.items():
        colour = palette.get(family, _COLOURS[len(palette) % len(_COLOURS)])
        palette.setdefault(family, colour)
        for variant in rest:
            pts = points[variant]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], color=colour, linewidth=0.8, alpha=0.4)
        pts = points[best]
        label = family_label(family, best, rest)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], color=colour, linewidth=1.8, marker="o", markersize=3.5,
                label=label, zorder=3)
    for i, variant in enumerate(left):
        pts = points[variant]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], color=_OTHER_COLOUR, linewidth=0.8, alpha=0.6,
                label=leftover_label(left) if i == 0 else None)
    if panel.ceiling and ceilings:
        ax.axhline(ceilings.copy_gbps, color="black", linewidth=0.9, linestyle="--",
                   label=f"copy ceiling: {ceilings.copy_gbps:,.0f} GB/s")
    ax.set_xscale("log", base=2)
    if lower:
        ax.set_yscale("log")
    ax.set_title(panel.title, fontsize=RACE_FONT_PT + 1)
    ax.set_xlabel(panel.xlabel or (panel.x if isinstance(panel.x, str) else "x"), fontsize=RACE_FONT_PT)
    ax.set_ylabel(_Y_LABELS.get(panel.y, panel.y), fontsize=RACE_FONT_PT)
    ax.tick_params(which="both", labelsize=RACE_FONT_PT)
    ax.grid(True, which="both", alpha=0.3)
    if not points:
        ax.text(0.5, 0.5, "no rows measured here", transform=ax.transAxes, ha="center", fontsize=RACE_FONT_PT)
    elif ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize=RACE_FONT_PT, frameon=False,
                  handlelength=1.8, borderaxespad=0.3, labelspacing=0.25)


def race_figure(result, panels: Sequence[Panel], *, axes: Mapping[int, Sequence[str]] | None = None,
                title: str = "") -> RaceFigure:
    """A chapter's race figure from its measured rows (a :class:`~labmagic.benchmark.race.BenchResult`, e.g.
    ``load_result(csv)``): ``panels`` two across, each with its own legend of at most :data:`MAX_LEGEND` families
    under it. ``axes`` names the dimensions of the shapes by their number (``{5: ["B", "H", "S_q", "S_k", "D"]}``)
    for the panels' ``x`` and ``keep``."""
    axes = axes or {}
    from matplotlib.figure import Figure

    title = title or f"{result.chapter} on {result.device}"
    if not panels:
        return RaceFigure(title, message=f"{title}: no panels to draw")
    rows = [r for r in result.rows if r.ms_median]
    if not rows:
        return RaceFigure(title, message=f"{title}: no measured rows yet (run the races on a GPU)")
    drawn = [(panel, _panel_points(rows, panel, axes)) for panel in panels]
    across = 1 if len(panels) == 1 else 2
    lines = max(min(MAX_LEGEND, len({p[0][2].backend for p in pts.values()}) + panel.ceiling)
                for panel, pts in drawn)
    row_in = PANEL_HEIGHT_IN + LEGEND_LINE_HEIGHT_IN * (lines + 2)
    down = -(-len(panels) // across)
    fig = Figure(figsize=(RACE_WIDTH_IN, row_in * down + 0.4), dpi=RACE_DPI, layout="constrained")
    grid = fig.subplots(down, across, squeeze=False)
    for ax, (panel, points) in zip(grid.flat, drawn):
        _draw_panel(ax, panel, points, result.ceilings)
    for ax in list(grid.flat)[len(panels):]:
        fig.delaxes(ax)
    fig.suptitle(f"{title}: bold, each family's fastest; thin, its other variants", fontsize=RACE_FONT_PT + 1)
    return RaceFigure(title, fig)
