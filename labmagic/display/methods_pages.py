"""The generated parts of the book's Methods pages (``book/methods/*.md``): tables and figures drawn from ``results/``
and from the chapters themselves when the book is built, never typed by hand.

A page asks for a part by name with a fenced block that :mod:`labmagic.sphinx.fill_methods` replaces::

    ```{labmagic-generated} ceilings
    ```

- ``ceilings``: each GPU's measured ceilings (``results/<gpu>/ceilings.json``, written by ``labmagic calibrate``)
  beside its spec sheet (:data:`labmagic.benchmark.roofline.SPECS`).
- ``book-roofline``: per GPU, every chapter's fastest variant at its largest problem on one roofline, with the
  measured ceilings, and the same points as a table.
- ``nsight-agreement``: per GPU, ``%bench``'s event times against Nsight Compute's for every row a
  ``--timer nsight`` sweep cross-checked (``results/<gpu>/nsight_check/<chapter>.csv``).
- ``flush-write-back``: per GPU, what an L2 flush by ``zero_()`` adds to the next kernel against a flush by reading
  (``results/<gpu>/flush_write_back.csv``, written by ``benchmarks/flush_write_back.py``).
- ``chapter-chart 01_vector_add``: the chart ``%bench`` saved for a chapter (``results/<gpu>/bench/<chapter>.png``).
- ``hip-refusal``: the line ``%%cuda_kernel`` answers with under a ROCm build of torch.
- ``porting-inventory``: per chapter, what its code uses that has no HIP equivalent or changes on AMD's CDNA
  (inline PTX, 32-lane warp shuffles, ``mma.sync``/``wgmma``, TMA, clusters), counted in ``book/*.ipynb``.

Everything read from ``results/`` is untrusted: names and values reach the page through
:func:`~labmagic.display.markdown.text`, files must be plain files inside ``results/``, and a malformed one stops the
build with a :class:`~labmagic.errors.LabError` naming it. Figures are PNGs inlined as ``data:`` URIs, so the build
writes nothing into the checkout.
"""

from __future__ import annotations

import base64
import io
import json
import math
import re
from pathlib import Path

from ..errors import LabError
from ..paths import CHAPTER_GLOB, CHAPTER_NAME
from ..store.catalog import SLUG, check_inside_results, load, measured_ok
from ..store.fingerprint import read_notebook
from .markdown import Markup, md_table, text
from .plots import DPI, MIN_FONT_PT, variant_styles
from .results_page import PLOT_NAME, headline_shape

#: Memory ceilings in ``ceilings.json``, in the order the table lists them, with what each measures.
MEMORY_CEILINGS = (("copy_gbps", "copy (Tensor.copy_)"), ("add_gbps", "add (torch.add, two reads a write)"),
                   ("read_gbps", "read (a sum, reads only)"), ("peak_gbps", "peak: the best of the three"))
#: One colour per dtype on the book's roofline (tab10's first colours).
_DTYPE_COLOURS = {"fp32": "#1f77b4", "tf32": "#17becf", "bf16": "#ff7f0e", "fp16": "#2ca02c", "int8": "#d62728",
                  "fp8": "#9467bd", "fp64": "#8c564b"}


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _gpu_dirs(root: Path, name: str) -> list[tuple[str, Path]]:
    """(slug, path) of every ``results/<slug>/<name>`` that exists, each checked: a plain slug, inside results/."""
    found = []
    for path in sorted((Path(root) / "results").glob(f"*/{name}")):
        slug = path.parent.name
        if not SLUG.fullmatch(slug):
            raise LabError(f"results/ holds a GPU folder {slug!r} that is not a device slug")
        check_inside_results(path, root)
        found.append((slug, path))
    return found


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise LabError(f"{where} is {value!r}, not a measurement")
    return float(value)


def _finite(value) -> float | None:
    """A CSV cell as a float (pandas gives ints, floats or NaN), None where it holds no finite number."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _fmt(value: float | None, digits: int = 4) -> str:
    if value is None:
        return "-"
    if value >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


# ---------------------------------------------------------------------------------------------------- ceilings


def read_ceilings(path: Path, root: Path) -> dict:
    """``ceilings.json`` with its numbers checked; LabError naming the file for anything calibrate does not write."""
    name = Path(path).relative_to(root).as_posix()
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise LabError(f"{name}: not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("matmul_tflops", {}), dict):
        raise LabError(f"{name}: not a ceilings record (an object with copy_gbps and matmul_tflops)")
    for key, _ in MEMORY_CEILINGS:
        if key in data or key == "copy_gbps":
            data[key] = _number(data.get(key), f"{name}: {key}")
    data["matmul_tflops"] = {str(k): _number(v, f"{name}: matmul_tflops[{k!r}]")
                             for k, v in data.get("matmul_tflops", {}).items()}
    for key in ("provenance", "method", "skipped"):
        if not isinstance(data.get(key, {}), dict):
            raise LabError(f"{name}: {key} is not an object")
    return data


def ceilings_section(root: Path) -> str:
    """Per GPU: each measured ceiling beside the spec sheet's, and how and where it was measured."""
    from ..benchmark.roofline import find_spec

    out = []
    for slug, path in _gpu_dirs(root, "ceilings.json"):
        data = read_ceilings(path, root)
        spec = find_spec(slug)
        rows = []
        for key, what in MEMORY_CEILINGS:
            if key in data:
                rows.append(_ceiling_row(f"memory: {what}", "GB/s", data[key], spec.bandwidth_gbps if spec else None))
        for dtype, tflops in data["matmul_tflops"].items():
            rows.append(_ceiling_row(f"matmul {dtype} (cuBLAS, n x n x n)", "TFLOP/s", tflops,
                                     spec.peak_tflops(dtype) if spec else None))
        prov, method = data.get("provenance", {}), data.get("method", {})
        made = ", ".join(f"{label} {text(prov[key])}" for key, label in
                         (("gpu", "on"), ("driver", "driver"), ("cuda", "CUDA"), ("torch", "torch"),
                          ("git_commit", "commit"), ("timestamp", "at")) if prov.get(key))
        how = ", ".join(f"{label} {text(method[key])}" for key, label in
                        (("copy_mib", "buffers of MiB:"), ("matmul_n", "matmul n ="), ("timer", "timer"))
                        if key in method)
        out += [f"**{text(slug)}** (`results/{text(slug)}/ceilings.json`)", "",
                md_table(["ceiling", "measured", f"spec sheet ({spec.name if spec else 'none known'})",
                          "measured / spec"], rows), "",
                f"Measured by `labmagic calibrate` {made or '(no provenance recorded)'}; "
                f"{how or 'method not recorded'}."]
        skipped = data.get("skipped", {})
        if skipped:
            out += ["Not measured: " + "; ".join(f"{text(k)} ({text(v)})" for k, v in sorted(skipped.items())) + "."]
        out.append("")
    if not out:
        return ("```{note}\nNo GPU has measured ceilings yet: `results/<gpu>/ceilings.json` is written by "
                "`labmagic calibrate` on the GPU.\n```")
    return "\n".join(out)


def _ceiling_row(what: str, unit: str, measured: float, spec: float | None) -> list:
    ratio = f"{measured / spec:.0%}" if spec else "-"
    return [f"{what}, {unit}", _fmt(measured), _fmt(spec) if spec else "-", ratio]


# ---------------------------------------------------------------------------------------------------- roofline


def roofline_points(root: Path) -> dict[str, list[dict]]:
    """Per GPU slug: for each chapter and dtype, the fastest variant that passed at the largest problem measured
    (the README headline's choice), with its arithmetic intensity and throughput."""
    from ..benchmark.roofline import dtype_key

    df = load(root)
    points: dict[str, list[dict]] = {}
    if df.empty:
        return points
    good = df[measured_ok(df)]
    for (slug, chapter, dtype), grp in sorted(good.groupby(["gpu_slug", "chapter", "dtype"])):
        shape = headline_shape(grp)
        best = grp[grp["shape"].astype(str) == shape].sort_values("ms_median").iloc[0]
        flops, nbytes, tflops = (_finite(best.get(col)) for col in ("flops", "nbytes", "tflops"))
        if not (flops and nbytes and tflops and min(flops, nbytes, tflops) > 0):
            continue  # a race that counts no FLOPs or no bytes has no place on a roofline
        points.setdefault(slug, []).append(dict(
            chapter=chapter, dtype=str(dtype), key=dtype_key(dtype), shape=shape, variant=str(best["variant"]),
            intensity=flops / nbytes, tflops=tflops, ceiling_pct=_finite(best.get("ceiling_pct"))))
    return points


def book_roofline_section(root: Path) -> str:
    """Per GPU with measured ceilings: the book's roofline figure and its points as a table."""
    from ..benchmark.roofline import Roof, find_spec, load_ceilings

    out = []
    by_gpu = roofline_points(root)
    for slug, path in _gpu_dirs(root, "ceilings.json"):
        points = by_gpu.get(slug)
        if not points:
            continue
        read_ceilings(path, root)  # the same checks as the ceilings table
        ceilings, spec = load_ceilings(slug, path), find_spec(slug)
        fig = roofline_figure(slug, points, ceilings, spec)
        rows = []
        for p in points:
            roof = Roof(ceilings.bandwidth_gbps, ceilings.peak_tflops(p["key"]), "measured")
            bound = "memory" if roof.memory_bound(p["intensity"], 1.0) else "compute"
            pct = p["ceiling_pct"]
            rows.append([p["chapter"], p["key"], _fmt(p["intensity"], 3), _fmt(p["tflops"], 4), bound,
                         "-" if pct is None else f"{pct:.1f}%", p["variant"], p["shape"]])
        out += [f"![The book's roofline on {text(slug)}]({_png(fig)})", "",
                f"*Every chapter's fastest variant at its largest problem on {text(slug)} (from "
                f"`results/{text(slug)}/bench/*.csv`), against the ceilings `labmagic calibrate` measured there "
                "(solid) and the spec sheet's (dashed). A point's label is its chapter's number.*", "",
                md_table(["chapter", "dtype", "FLOP/byte", "TFLOP/s", "bound", "% ceiling", "variant", "shape"],
                         rows), "",
                "**bound**: the roof that limits the point, memory or compute, at the measured ceilings; "
                "**% ceiling**: the row's `% ceiling` as `%bench` stored it.", ""]
    if not out:
        return ("```{note}\nNo GPU has both measured ceilings and bench rows yet: run `labmagic calibrate` and "
                "`labmagic sweep` on a GPU.\n```")
    return "\n".join(out)


def roofline_figure(slug: str, points: list[dict], ceilings, spec):
    """Log-log roofline: the memory slope and one compute roof per dtype the points use, measured solid and spec
    dashed, and the points coloured by dtype, labelled by chapter number."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.8, 5.2), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    lo = min(p["intensity"] for p in points) / 4
    hi = max(max(p["intensity"] for p in points) * 4, 2000.0)
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    for key in sorted({p["key"] for p in points}):
        colour = _DTYPE_COLOURS.get(key, "gray")
        for source, bw, tf, style in (("measured", ceilings.bandwidth_gbps, ceilings.peak_tflops(key), "-"),
                                      ("spec", spec.bandwidth_gbps if spec else None,
                                       spec.peak_tflops(key) if spec else None, "--")):
            if not bw:
                continue
            ys = [min(bw * x / 1e3, tf) if tf else bw * x / 1e3 for x in xs]
            label = f"{key} {source}: {bw:,.0f} GB/s" + (f", {tf:,.4g} TFLOP/s" if tf else "")
            ax.plot(xs, ys, style, color=colour, linewidth=1.0, alpha=0.8 if source == "measured" else 0.5,
                    label=label)
    for p in points:
        colour = _DTYPE_COLOURS.get(p["key"], "gray")
        ax.plot([p["intensity"]], [p["tflops"]], "o", color=colour, markersize=6, markeredgecolor="black",
                markeredgewidth=0.5)
        ax.annotate(p["chapter"][:2], (p["intensity"], p["tflops"]), textcoords="offset points", xytext=(4, 4),
                    fontsize=MIN_FONT_PT)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)", fontsize=MIN_FONT_PT + 1)
    ax.set_ylabel("achieved TFLOP/s", fontsize=MIN_FONT_PT + 1)
    ax.set_title(f"the book's roofline on {slug}", fontsize=MIN_FONT_PT + 2)
    ax.grid(True, which="both", alpha=0.3)
    ax.tick_params(which="both", labelsize=MIN_FONT_PT)
    ax.legend(fontsize=MIN_FONT_PT, frameon=False, loc="lower right")
    return fig


# ---------------------------------------------------------------------------------------------------- timing


def nsight_rows(root: Path) -> dict[str, list[dict]]:
    """Per GPU slug: every row of its ``nsight_check/<chapter>.csv`` files, each with its ``chapter``."""
    from ..benchmark.ncu_check import read_check_csv

    out: dict[str, list[dict]] = {}
    for slug, folder in _gpu_dirs(root, "nsight_check"):
        for path in sorted(folder.glob("*.csv")):
            name = path.relative_to(root).as_posix()
            if not CHAPTER_NAME.fullmatch(path.stem):
                raise LabError(f"{name}: {path.stem!r} is not a chapter name")
            check_inside_results(path, root)
            out.setdefault(slug, []).extend(dict(row, chapter=path.stem) for row in read_check_csv(path, name))
    return out


def nsight_section(root: Path) -> str:
    """Per GPU: events / Nsight against the call's length, the claim's band, and the verdicts counted."""
    from ..benchmark.ncu_check import AGREE_WITHIN, AGREES, CLAIMED_FROM_MS, DISAGREES, SHORT

    out = []
    for slug, rows in nsight_rows(root).items():
        timed = [r for r in rows if r["event_ms"] and r["nsight_ms"]]
        if not timed:
            continue
        counts = {v: sum(r["verdict"] == v for r in rows) for v in (AGREES, DISAGREES, SHORT)}
        judged = [r for r in timed if r["verdict"] in (AGREES, DISAGREES)]
        worst = max(judged, key=lambda r: abs(math.log(r["event_ms"] / r["nsight_ms"])), default=None)
        chapters = ", ".join(sorted({r["chapter"] for r in rows}))
        fig = nsight_figure(slug, timed, AGREE_WITHIN, CLAIMED_FROM_MS)
        summary = (f"{len(rows)} rows from {text(chapters)}: {counts[AGREES]} agree within {AGREE_WITHIN:.0%}, "
                   f"{counts[DISAGREES]} disagree, {counts[SHORT]} are shorter than "
                   f"{CLAIMED_FROM_MS * 1e3:.0f} µs on both timers and are not judged")
        if worst is not None:
            ratio = worst["event_ms"] / worst["nsight_ms"]
            summary += (f"; the judged row farthest from Nsight is {text(worst['variant'])} at "
                        f"{text(worst['shape'])} ({ratio - 1:+.1%})")
        out += [f"![%bench against Nsight Compute on {text(slug)}]({_png(fig)})", "",
                f"*`results/{text(slug)}/nsight_check/`: {summary}.*", ""]
    if not out:
        return ("```{note}\nNo cross-check yet: `labmagic sweep --timer nsight` on a GPU writes "
                "`results/<gpu>/nsight_check/<chapter>.csv`.\n```")
    return "\n".join(out)


def nsight_figure(slug: str, rows: list[dict], within: float, from_ms: float):
    """events / Nsight against the Nsight time (µs, log), one colour per variant; the band where the claim holds."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.8, 4.4), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    right = max(max(r["nsight_ms"] for r in rows) * 1e3, from_ms * 1e3) * 2
    ax.fill_between([from_ms * 1e3, right], 1 - within, 1 + within, color="#b7e3b7", alpha=0.7, zorder=0,
                    label=f"the claim: within {within:.0%} from {from_ms * 1e3:.0f} µs")
    ax.axvline(from_ms * 1e3, color="gray", linestyle="--", linewidth=1.0)
    styles = variant_styles([r["variant"] for r in rows])
    for variant in dict.fromkeys(r["variant"] for r in rows):
        pts = sorted((r["nsight_ms"] * 1e3, r["event_ms"] / r["nsight_ms"]) for r in rows if r["variant"] == variant)
        style = styles[variant]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=style["marker"], color=style["color"],
                linestyle="", markersize=5, label=variant)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlim(right=right)
    ax.set_xlabel("Nsight Compute's time per call (µs)", fontsize=MIN_FONT_PT + 1)
    ax.set_ylabel("%bench median / Nsight median", fontsize=MIN_FONT_PT + 1)
    ax.set_title(f"%bench (CUDA events) against Nsight Compute on {slug}", fontsize=MIN_FONT_PT + 2)
    ax.grid(True, which="both", alpha=0.3)
    ax.tick_params(which="both", labelsize=MIN_FONT_PT)
    ax.legend(fontsize=MIN_FONT_PT, frameon=False, loc="lower right", ncol=2)
    return fig


def write_back_section(root: Path) -> str:
    """Per GPU: the kernel's time after each flush, the write-back the dirty lines add, and the flushes' own times,
    each row with where and when it was measured; a note saying so where no GPU has measured it."""
    from ..benchmark.write_back import FILE_NAME, read_write_back_csv

    out = []
    for slug, path in _gpu_dirs(root, FILE_NAME):
        name = path.relative_to(root).as_posix()
        for row in read_write_back_csv(path, name):
            low, high = row["write_back_low_us"], row["write_back_high_us"]
            interval = f", 95% interval {low:+.2f} to {high:+.2f} µs" if low is not None and high is not None else ""
            share = (f", {row['write_back_us'] / row['after_read_us']:+.0%} of the kernel's time"
                     if row["after_read_us"] > 0 else "")
            made = ", ".join(f"{label} {text(row[key])}" for key, label in
                             (("gpu", "on"), ("driver", "driver"), ("cuda", "CUDA"), ("torch", "torch"),
                              ("git_commit", "commit"), ("timestamp", "at")) if row[key])
            out += [f"**{text(slug)}** (`{text(name)}`): {text(row['kernel'])} of {row['n']:,} elements "
                    f"({row['kernel_bytes'] / 1e6:,.0f} MB moved) took **{row['after_read_us']:.2f} µs** after the "
                    f"L2 was flushed by reading and **{row['after_zero_us']:.2f} µs** after `zero_()`: the write-back "
                    f"of the dirty lines added **{row['write_back_us']:+.2f} µs** (the median of {row['pairs']} "
                    f"paired differences{interval}){share}. Both flushes used a {row['flush_bytes'] / 2**20:,.0f} MiB "
                    f"buffer (the L2: {row['l2_bytes'] / 2**20:,.0f} MiB); reading it took {row['read_flush_us']:.2f} "
                    f"µs, zeroing it {row['zero_flush_us']:.2f} µs. Measured by `benchmarks/flush_write_back.py` "
                    f"{made or '(no provenance recorded)'}.", ""]
    if not out:
        return ("```{note}\nNot measured yet: `python benchmarks/flush_write_back.py` on a GPU writes "
                "`results/<gpu>/flush_write_back.csv`, and this page quotes it.\n```")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------------- ROCm


#: What a HIP port must rewrite, as it appears in a chapter's code cells: (column, pattern, why).
PORTING_MARKS = (
    ("CUDA cells", re.compile(r"^%%cuda_kernel\b", re.M), "`%%cuda_kernel` cells, compiled by NVRTC; a HIP track "
     "compiles HIP C++"),
    ("PTX asm", re.compile(r"\basm\s*(?:volatile\s*)?\("), "inline PTX statements, which have no meaning on AMD"),
    ("shuffles", re.compile(r"__shfl\w*"), "warp shuffles, written for 32 lanes; a CDNA wavefront has 64"),
    ("mma / wgmma", re.compile(r"\bmma\.sync\b|\bwgmma\."), "tensor-core PTX (`mma.sync`, `wgmma`); CDNA has MFMA "
     "instructions"),
    ("TMA", re.compile(r"cp\.async\.bulk\.tensor"), "TMA copies (`cp.async.bulk.tensor`): Hopper's copy engine, "
     "which CDNA lacks"),
    ("clusters", re.compile(r"__cluster_dims__"), "kernels in thread-block clusters (`__cluster_dims__`), Hopper's"),
    ("Triton", re.compile(r"^@triton\.jit\b", re.M), "`@triton.jit` kernels: Triton has an AMD backend"),
)


def porting_counts(notebook: Path) -> dict[str, int]:
    """How often each of :data:`PORTING_MARKS` occurs in a chapter's code cells."""
    cells = read_notebook(notebook)["cells"]
    code = "\n".join("".join(c.get("source", "")) for c in cells if c.get("cell_type") == "code")
    return {column: len(pattern.findall(code)) for column, pattern, _ in PORTING_MARKS}


def inventory_section(root: Path) -> str:
    """Per chapter: what its code uses that a HIP port must rewrite, counted in ``book/*.ipynb``."""
    chapters = sorted((Path(root) / "book").glob(CHAPTER_GLOB))
    if not chapters:
        return "```{note}\nThe book has no chapters yet.\n```"
    columns = [column for column, _, _ in PORTING_MARKS]
    body = [[Markup(f"{{doc}}`{c.stem} </book/{c.stem}>`") if CHAPTER_NAME.fullmatch(c.stem) else c.stem,
             *porting_counts(c).values()] for c in chapters]
    notes = "; ".join(f"**{text(column)}**: {why}" for column, _, why in PORTING_MARKS)  # our own words
    return md_table(["chapter", *columns], body) + f"\n\n*Counted in each chapter's code cells when the book was " \
        f"built. {notes}.*"


#: The HIP version the ROCm page's example shows (a ROCm 6.2 build of torch reports one like it).
EXAMPLE_HIP = "6.2.41133-dd7f95766"


def hip_refusal_section(root: Path) -> str:
    """What ``%%cuda_kernel`` says under a ROCm build of torch, as :mod:`labmagic.compiler.backend` words it."""
    from ..compiler.backend import BackendUnavailable, refusal

    return f"```text\n{BackendUnavailable.__name__}: {refusal(EXAMPLE_HIP)}\n```"


def chapter_chart_section(root: Path, chapter: str) -> str:
    """The plots ``%bench`` saved beside a chapter's CSV (``results/<gpu>/bench/<chapter>*.png``), every GPU's."""
    out = []
    for slug, folder in _gpu_dirs(root, "bench"):
        for png in sorted(folder.glob(f"{chapter}*.png")):
            if not PLOT_NAME.fullmatch(png.name) or not png.is_file() or png.stem.split(".")[0] != chapter:
                continue  # another chapter's (01_vector_add2.png), or a name the Results page refuses
            check_inside_results(png, root)
            out += [f"![{text(chapter)} on {text(slug)}: {text(png.stem)}](/{png.relative_to(root).as_posix()})",
                    "", f"*`{png.relative_to(root).as_posix()}`, drawn by `%bench` from the chapter's rows.*", ""]
    if not out:
        return (f"```{{note}}\nNo chart of {text(chapter)} yet: `%bench` saves "
                f"`results/<gpu>/bench/{text(chapter)}.png` after a run on a GPU.\n```")
    return "\n".join(out)


#: Name -> the function that renders it (the fenced block's argument); the chapter chart also takes a chapter.
GENERATED = {
    "ceilings": ceilings_section,
    "book-roofline": book_roofline_section,
    "nsight-agreement": nsight_section,
    "flush-write-back": write_back_section,
    "porting-inventory": inventory_section,
    "chapter-chart": chapter_chart_section,
    "hip-refusal": hip_refusal_section,
}


def generated(name: str, root: Path, argument: str | None = None) -> str:
    """The MyST Markdown of the generated part ``name`` (``chapter-chart`` takes a chapter name as ``argument``);
    LabError for a name no page may ask for or an argument it does not take."""
    if name not in GENERATED:
        raise LabError(f"no generated part {name!r} (known: {', '.join(GENERATED)})")
    if name == "chapter-chart":
        if argument is None or not CHAPTER_NAME.fullmatch(argument):
            raise LabError(f"chapter-chart needs a chapter name, like 01_vector_add, not {argument!r}")
        return chapter_chart_section(Path(root), argument)
    if argument is not None:
        raise LabError(f"{name} takes no argument, got {argument!r}")
    return GENERATED[name](Path(root))
