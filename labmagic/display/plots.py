"""The race's plots: latency (or, for one size in many row lengths, bandwidth against the copy ceiling) and peak
memory against size, and the roofline with this GPU's ceilings.

Drawn with matplotlib's object API (``Figure``, no ``pyplot``), so saving a PNG neither needs nor
changes a GUI backend and works the same in a notebook, papermill and a test.

The figure is sized for the book's text column (784 px): 7.8 inches wide at 110 dpi, so it is shown at about its
own size and an 8 pt label stays 8 pt. Two panels sit on top (latency, roofline), peak memory below, and the
legend has the fourth quarter to itself, so sixteen variants cover no data. A race of more variants (chapter 07
has 28) keeps the ceilings in that quarter and gets a row of its own under the panels for the variants, four to a
line; the figure grows taller by that row, not narrower.
"""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

from ..paths import atomic_write
from ..store.schema import shape_dims, shape_size

#: Inches and dots per inch of the saved figure: 858 px wide, a little over the 784 px column it is scaled to.
FIGSIZE = (7.8, 6.0)
DPI = 110
#: Smallest font on the figure (ticks, legend), in points at FIGSIZE.
MIN_FONT_PT = 8
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
    if len(series) <= PANEL_VARIANTS:
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
    for name, points in series.items():
        style = dict(styles[name], markersize=4, linewidth=1.2)
        if by_row:
            gb = [(x, r.gbps) for x, r in points if r.gbps]
            ax_t.plot([g[0] for g in gb], [g[1] for g in gb], label=name, **style)
        else:
            ax_t.plot([p[0] for p in points], [p[1].ms_median for p in points], label=name, **style)
        mem = [(x, r.peak_mem_bytes / 2**20) for x, r in points if r.peak_mem_bytes is not None]
        if mem:
            ax_m.plot([m[0] for m in mem], [m[1] for m in mem], label=name, **style)
        roof_pts = [(r.tflops / r.gbps * 1e3, r.tflops) for _, r in points if r.tflops and r.gbps]
        if roof_pts:
            ax_r.plot([p[0] for p in roof_pts], [p[1] for p in roof_pts], label=name, **dict(style, linestyle=""))
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
