"""The race's plots: latency and peak memory against size, and the roofline with this GPU's ceilings.

Drawn with matplotlib's object API (``Figure``, no ``pyplot``), so saving a PNG neither needs nor
changes a GUI backend and works the same in a notebook, papermill and a test.
"""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

from ..paths import atomic_write
from ..store.schema import shape_size


def _series(result):
    """variant -> list of (size, row) for rows that have a time, in size order."""
    out: dict[str, list] = {}
    for row in result.rows:
        if row.ms_median:
            size = shape_size(row.shape)
            out.setdefault(row.variant, []).append((size, row))
    return out


def figure(result):
    """A 1x3 figure: latency vs size, peak memory vs size, roofline (intensity vs achieved throughput)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(15, 4.2), layout="constrained")
    ax_t, ax_m, ax_r = fig.subplots(1, 3)
    series = _series(result)
    for name, points in series.items():
        sizes = [p[0] for p in points]
        ax_t.plot(sizes, [p[1].ms_median for p in points], marker="o", label=name)
        mem = [(s, r.peak_mem_bytes / 2**20) for s, r in points if r.peak_mem_bytes is not None]
        if mem:
            ax_m.plot([m[0] for m in mem], [m[1] for m in mem], marker="o", label=name)
        roof_pts = [(r.tflops / r.gbps * 1e3, r.tflops) for _, r in points if r.tflops and r.gbps]
        if roof_pts:
            ax_r.plot([p[0] for p in roof_pts], [p[1] for p in roof_pts], marker="o", linestyle="", label=name)
    for ax, title, ylabel in ((ax_t, "latency (median)", "ms"), (ax_m, "peak extra memory per call", "MiB")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("problem size (elements)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    ax_t.set_yscale("log")
    _draw_roofs(ax_r, result)
    ax_r.set_xscale("log")
    ax_r.set_yscale("log")
    ax_r.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax_r.set_ylabel("achieved TFLOP/s")
    ax_r.set_title("roofline")
    ax_r.grid(True, which="both", alpha=0.3)
    if series:
        ax_t.legend(fontsize=8)
        ax_r.legend(fontsize=8)
    dtypes = sorted({r.dtype for r in result.rows if r.dtype})
    fig.suptitle(f"{result.chapter} on {result.device}" + (f", {dtypes[0]}" if len(dtypes) == 1 else ""))
    return fig


def _draw_roofs(ax, result) -> None:
    """Bandwidth slope and compute ceiling, spec dashed, measured solid."""
    dtype = result.rows[0].dtype if result.rows else "float32"
    roofs = []
    if result.spec:
        roofs.append(("spec", result.spec.bandwidth_gbps, result.spec.peak_tflops(dtype), "--"))
    if result.ceilings:
        roofs.append(("measured", result.ceilings.bandwidth_gbps, result.ceilings.peak_tflops(dtype), "-"))
    xs = [2.0 ** e for e in range(-6, 13)]
    for label, bw, tf, style in roofs:
        ys = [min(bw * x / 1e3, tf) if tf else bw * x / 1e3 for x in xs]
        ax.plot(xs, ys, style, color="gray", label=f"{label}: {bw:.0f} GB/s" + (f", {tf:g} TFLOP/s" if tf else ""))


def png_bytes(result, dpi: int = 110) -> bytes:
    buf = io.BytesIO()
    figure(result).savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def save_png(result, path) -> Path:
    """Write the figure to ``path`` atomically."""
    return atomic_write(path, result.png or png_bytes(result))


def save_chapter_pngs(result) -> dict[str, Path]:
    """A chapter's plots next to its CSV: ``<chapter>.png``, or ``<chapter>.<dtype>.png`` per dtype when the
    chapter races several (one figure mixing fp32 and bf16 rows would draw each variant as a zigzag)."""
    csv_path = Path(result.csv_path)
    dtypes = sorted({r.dtype for r in result.rows})
    if len(dtypes) <= 1:
        return {d: save_png(result, csv_path.with_suffix(".png")) for d in dtypes}
    csv_path.with_suffix(".png").unlink(missing_ok=True)  # the single-dtype plot this CSV had before
    return {d: save_png(dataclasses.replace(result, rows=[r for r in result.rows if r.dtype == d], png=None),
                        csv_path.with_suffix(f".{d}.png")) for d in dtypes}
