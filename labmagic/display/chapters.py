"""What the book shows of each chapter, stated once per chapter (:data:`CHAPTERS`): its headline (the best kernel,
that kernel's figure and its ratio against a reference the row names), what it teaches in one line, the names of its
shapes' axes, and the panels of its race figure (:func:`race_figure`).

Both tables are generated, never typed: into ``README.md`` between markers (``labmagic results --readme``; a test
runs ``--check-readme``) and onto the book's front page (``book/intro.md``, by :mod:`labmagic.sphinx.fill_results`
when the book is built). The rule is stated once, here, per chapter (:data:`CHAPTERS`): the shape and dtype the
headline is taken at, and what the best kernel is compared with:

- a compute-bound chapter, against the library kernel the race includes at that shape (cuBLAS through ``torch``,
  cuDNN through SDPA): ``1.04x cuBLAS, 8192^3 bf16``, the library's median over the kernel's;
- a memory-bound chapter, against this GPU's measured copy (``labmagic calibrate``): ``94% of copy``;
- and in a kernel race that times open-source peers (``peers=True``), against the fastest of them at that shape too:
  ``; 0.85x FA3 (the fastest peer)``, the peer's median over the kernel's.

The best kernel is the book's own: the fastest variant that passed, at that shape and dtype, whose backend is not a
library (:data:`LIBRARY_BACKENDS`) and whose time is not below the physical floor. A chapter missing from
:data:`CHAPTERS` still gets a row: the largest problem measured, against the race's own reference.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..benchmark import roofline
from ..dsl import DSLS
from ..errors import LabError
from ..paths import CHAPTER_GLOB, CHAPTER_NAME
from ..runtime import device_slug
from ..store.catalog import measured_ok
from ..store.fingerprint import read_notebook
from ..store.schema import shape_dims
from .markdown import Markup, md_table, text
from .plots import PROBLEM_SIZE, ROW_LENGTH, Panel, RaceFigure, x_axis
from .plots import race_figure as draw_race_figure
from .units import cell_number

#: Backends of library kernels: a race's reference points and the open-source peers (labmagic.dsl's), never the
#: book's best kernel.
LIBRARY_BACKENDS = frozenset({"torch", "sdpa", "cublas", *(d.name for d in DSLS.values() if d.peer)})

#: The GPU whose numbers the front page leads with (the book's outputs come from it).
BOOK_GPU = "nvidia-h200"

#: The open-source peers' backends, and how a headline names each ("FA3").
PEER_TITLES = {d.name: d.title or d.name for d in DSLS.values() if d.peer}


@dataclass(frozen=True)
class Chapter:
    """What the book says about one chapter's results."""

    teaches: str  #: one short line: what the chapter teaches
    axes: dict[int, str] = field(default_factory=dict)  #: names of a shape's axes, by its number of dimensions
    shape: str = ""  #: the headline's shape key (as the CSV writes it); "" for the largest problem measured
    dtype: str = ""  #: the headline's dtype
    against: str | None = None  #: the reference variant; None compares with the measured copy ceiling
    against_name: str = ""  #: how the row names that reference: "cuBLAS"
    where: str = ""  #: how the row names the shape and dtype: "8192^3 bf16"
    exclude: str = ""  #: a pattern of variants that are not the headline's kind (07: the causal ones)
    #: the row also names the fastest open-source peer the race timed at that shape (a kernel race: not 09's model,
    #: whose FlashInfer row is the book's decode step with a peer inside)
    peers: bool = False
    figure: tuple[Panel, ...] = ()  #: the panels of the chapter's race figure (:func:`race_figure`)

    def axes_of(self, shape: str) -> str:
        """``B x H x S_q x S_k x D`` for a shape of five dimensions; '' where the chapter names none."""
        return self.axes.get(len(shape_dims(shape)), "")


def _prefill(causal: bool):
    """07's prefill rows in bf16 at d = 128, causal or not."""
    return lambda d, row: (row.dtype == "bfloat16" and d.get("S_q", 1) > 1 and d.get("D") == 128
                           and row.variant.endswith("_causal") == causal)


#: Chapter 07's figure: prefill TFLOP/s by sequence length, non-causal and causal; decode's KV-cache bandwidth.
ATTENTION_FIGURE = (
    Panel("prefill, d = 128, non-causal", "S_q", "tflops", "sequence length (tokens)", _prefill(False)),
    Panel("prefill, d = 128, causal", "S_q", "tflops", "sequence length (tokens)", _prefill(True)),
    Panel("decode, 16 heads of 128", lambda d: d["B"] * d["S_k"], "gbps", "cached tokens, all sequences (B x S_k)",
          lambda d, row: d.get("S_q") == 1, ceiling=True),
)

_ROWS_COLS = {2: "rows x cols"}
_MNK = {3: "M x N x K"}

#: The rule, once per chapter.
CHAPTERS: dict[str, Chapter] = {
    "01_vector_add": Chapter(
        "a memory-bound kernel: one element per thread, float4 loads, grid-stride loops",
        {1: "N"}, "268435456", "float32", where="2^28 fp32"),
    "02_sgemm": Chapter(
        "the fp32 SGEMM ladder: shared-memory, register and warp tiles, cp.async, stream-K",
        _MNK, "8192x8192x8192", "float32", "torch", "cuBLAS", "8192^3 fp32"),
    "03_online_softmax": Chapter(
        "softmax in one read: the online max and sum, warp- and cluster-per-row, rows in registers",
        _ROWS_COLS, "16384x16384", "bfloat16", where="16384^2 bf16", peers=True),
    "04_rmsnorm": Chapter(
        "RMSNorm in one read: vectorized, warp-per-row, copy-engine and persistent cluster rungs",
        _ROWS_COLS, "16384x16384", "bfloat16", where="16384^2 bf16", peers=True),
    "05_fused_softmax_rmsnorm": Chapter(
        "fusion: softmax(RMSNorm(x)) in one kernel, against eager torch and torch.compile",
        _ROWS_COLS, "16384x16384", "bfloat16", where="16384^2 bf16", peers=True),
    "06_tensor_core_gemm": Chapter(
        "bf16 tensor cores: WMMA, mma.sync, Hopper TMA and wgmma, clusters, split-K decode",
        _MNK, "8192x8192x8192", "bfloat16", "torch", "cuBLAS", "8192^3 bf16", peers=True),
    "07_attention": Chapter(
        "FlashAttention forward: FA1, FA2 and the FA3 wgmma schedules, and flash-decoding",
        {5: "B x H x S_q x S_k x D"}, "4x16x4096x4096x128", "bfloat16", "sdpa_cudnn", "cuDNN", "4x4096 d128",
        exclude=r"_causal$", figure=ATTENTION_FIGURE, peers=True),
    "08_int8": Chapter(
        "int8: quantize at the copy bandwidth, int8 tensor-core GEMMs, a fused W8A8 linear",
        {**_ROWS_COLS, **_MNK}, "8192x8192x8192", "int8", "torch_int_mm", "cuBLAS int8", "8192^3 int8"),
    "09_llama": Chapter(
        "the capstone: a Llama-3-8B-shaped model from the book's kernels, GQA, RoPE, a KV cache, prefill and decode",
        {2: "batch x tokens"}, "1x4096", "bfloat16", "torch_hf_sdpa", "transformers eager",
        "decode step, batch 1, 4k context, bf16", exclude=r"prefill|w8a8"),
    "10_fp8": Chapter(
        "FP8 on Hopper: e4m3, quantisation at the copy bandwidth, row-wise and 1x128-block-scaled FP8 GEMMs, INT8 on "
        "wgmma", {2: "tokens x features", **_MNK}, "8192x8192x8192", "float8_e4m3fn", "torch_scaled_mm_fast_rowwise",
        "cuBLAS FP8 (row-wise, fast accumulation)", "8192^3 e4m3", exclude=r"^triton_tma_"),
}

#: Markers of the generated blocks, in README.md (filled by ``labmagic results --readme``) and in book/intro.md
#: (filled when the book is built).
HEADLINE_BEGIN = "<!-- results:headline:begin (generated from results/: do not edit) -->"
HEADLINE_END = "<!-- results:headline:end -->"
CHAPTERS_BEGIN = "<!-- results:chapters:begin (generated from labmagic.display.chapters: do not edit) -->"
CHAPTERS_END = "<!-- results:chapters:end -->"


def rule(chapter: str) -> Chapter:
    """The chapter's rule; a chapter :data:`CHAPTERS` does not name gets the generic one."""
    return CHAPTERS.get(chapter, Chapter(teaches=""))


def is_library(row) -> bool:
    return str(row.get("backend", "")).lower() in LIBRARY_BACKENDS


def per_second(row, spec: roofline.GpuSpec | None) -> tuple[float | None, str]:
    """The row's throughput in the unit that bounds it at the spec's ridge point: (GB/s, 'GB/s') for a memory-bound
    row, else (TFLOP/s, 'TFLOP/s'; 'TOP/s' for integer dtypes)."""
    flops, nbytes = cell_number(row.get("flops")), cell_number(row.get("nbytes"))
    roof = roofline.spec_roof(spec, str(row.get("dtype"))) if spec else None
    if roof and (flops or nbytes):
        memory = roof.memory_bound(flops, nbytes)
    else:  # no spec, or no counts of work: the throughput the row has
        memory = cell_number(row.get("gbps")) is not None and not flops
    if memory:
        return cell_number(row.get("gbps")), "GB/s"
    unit = "TOP/s" if str(row.get("dtype", "")).startswith(("int", "uint")) else "TFLOP/s"
    return cell_number(row.get("tflops")), unit




def figure(value: float | None, unit: str) -> str:
    """``726 TFLOP/s``, ``4,105 GB/s``: three significant digits, thousands separated."""
    if value is None:
        return "-"
    digits = max(0, 2 - math.floor(math.log10(abs(value)))) if value else 0
    return f"{value:,.{digits}f}\u00a0{unit}"  # no line break between a number and its unit


def race_references(rows: pd.DataFrame) -> list[str]:
    """The variants the races timed the others against: each one's every ``vs_ref`` is exactly 1 (a chapter that
    races causal and non-causal attention has one reference per race), in the rows' order."""
    if rows.empty or "vs_ref" not in rows.columns:
        return []
    ones = rows.groupby("variant", sort=False)["vs_ref"].apply(lambda v: set(v.dropna()) == {1.0})
    return [str(variant) for variant, yes in ones.items() if yes]


def race_reference(rows: pd.DataFrame) -> str | None:
    """The first of :func:`race_references`; None when no variant is one."""
    found = race_references(rows)
    return found[0] if found else None


def short_title(root: Path, chapter: str) -> str:
    """A chapter's title up to its colon ("07 · Attention"), from its notebook's first heading; the chapter's name
    where it has none."""
    try:
        cells = read_notebook(Path(root) / "book" / f"{chapter}.ipynb").get("cells", [])
    except (LabError, OSError):
        return chapter
    for cell in cells:
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        if cell.get("cell_type") != "markdown":
            continue
        for line in source.splitlines():
            if line.startswith("# "):
                return re.sub(r"[`*_$]", "", line[2:]).split(":")[0].strip() or chapter
    return chapter


def _largest(rows: pd.DataFrame) -> tuple[str, str]:
    """(shape, dtype) of the largest problem measured: the squarest shape of the largest size, of the first dtype
    sorted that has it."""
    sizes = rows["shape"].map(lambda s: math.prod(shape_dims(s)) if shape_dims(s) else 0)
    top = rows[sizes == sizes.max()]
    squareness = top["shape"].map(lambda s: min(shape_dims(s)) / max(shape_dims(s)))
    best = top[squareness == squareness.max()].sort_values(["dtype", "shape"]).iloc[0]
    return str(best["shape"]), str(best["dtype"])


@dataclass
class Headline:
    """One row of the headline: a chapter's best kernel on one GPU, and how it compares."""

    chapter: str
    gpu: str
    kernel: str
    figure: str
    versus: str
    stale: bool = False


def headline(chapter: str, gpu: str, rows: pd.DataFrame, ceilings: roofline.Ceilings | None) -> Headline | None:
    """The chapter's headline on one GPU from its rows (:func:`labmagic.display.results_page.catalog`'s, floor
    judged); None when the GPU measured nothing at the rule's shape and dtype."""
    this = rule(chapter)
    good = rows[measured_ok(rows) & (rows["below_floor"].astype(str) != "True")]
    if good.empty:
        return None
    if this.shape:
        shape, dtype, where = this.shape, this.dtype, this.where or f"{this.shape} {this.dtype}"
    else:
        shape, dtype = _largest(good)
        where = f"{shape} {dtype}"
    at = good[(good["shape"].astype(str) == shape) & (good["dtype"].astype(str) == dtype)]
    against = this.against if this.shape else race_reference(at)
    ours = _of_kind(at[~at.apply(is_library, axis=1) & (at["variant"] != against)] if not at.empty else at,
                    this.exclude)
    if ours.empty:
        return None
    best = ours.sort_values("ms_median").iloc[0]
    value, unit = per_second(best, roofline.find_spec(gpu))
    if this.shape and against is None:  # the rule compares with the copy: a memory-bound chapter
        value, unit = cell_number(best.get("gbps")), "GB/s"
    if against is None and unit != "GB/s":  # no reference in the race: the measured ceiling
        versus = f"{cell_number(best.get('ceiling_pct')) or 0:.0f}% of the measured ceiling, {where}"
    elif against is None:  # a memory-bound chapter: the measured copy is the reference
        versus = (f"{100 * (value or 0) / ceilings.copy_gbps:.0f}% of copy, {where}" if ceilings
                  else f"no measured copy on {gpu} (labmagic calibrate), {where}")
    else:
        ref = at[at["variant"] == against]
        if ref.empty:
            return None
        versus = f"{ref['ms_median'].iloc[0] / best['ms_median']:.2f}x {this.against_name or against}, {where}"
    if this.peers:
        versus += _versus_peer(at, best, this.exclude)
    return Headline(chapter, gpu, str(best["variant"]), figure(value, unit), versus, bool(best.get("stale")))


def _of_kind(rows: pd.DataFrame, exclude: str) -> pd.DataFrame:
    """The rows of the headline's kind: those whose variant ``exclude`` (a pattern; '' for none) does not match."""
    if not exclude or rows.empty:
        return rows
    return rows[~rows["variant"].astype(str).str.contains(exclude, regex=True)]


def _versus_peer(at: pd.DataFrame, best, exclude: str) -> str:
    """``; 0.85x FA3``: the headline kernel against the fastest open-source peer timed at the headline's shape and
    dtype (of the headline's kind: ``exclude`` holds for the peers too), as the reference ratio is (the peer's
    median over the kernel's); '' where the race timed none there."""
    peers = _of_kind(at[at["backend"].astype(str).str.lower().isin(PEER_TITLES)], exclude)
    if peers.empty:
        return ""
    fastest = peers.sort_values("ms_median").iloc[0]
    title = PEER_TITLES[str(fastest["backend"]).lower()]
    return f"; {fastest['ms_median'] / best['ms_median']:.2f}x {title} (the fastest peer)"


def headline_rows(df: pd.DataFrame, ceilings: dict[str, roofline.Ceilings | None]) -> list[Headline]:
    """Every chapter's headline, on every GPU that measured it at its rule's shape: the book's GPU first."""
    found = []
    if df.empty:
        return found
    for (chapter, gpu), rows in df.groupby(["chapter", "gpu_slug"]):
        row = headline(str(chapter), str(gpu), rows, ceilings.get(str(gpu)))
        if row:
            found.append(row)
    return sorted(found, key=lambda h: (h.chapter, h.gpu != BOOK_GPU, h.gpu))


def headline_markdown(rows: list[Headline], *, link: Path | None = None) -> str:
    """The headline table; with ``link`` (the checkout), each chapter is a link to its page (the front page)."""
    if not rows:
        return "No measurements yet: `results/` holds no bench CSVs (run `labmagic sweep` on a GPU)."
    gpus = sorted({h.gpu for h in rows})
    head = ["chapter", "best kernel", "figure", "against"] + (["GPU"] if len(gpus) > 1 else [])
    body = []
    for h in rows:
        kernel = Markup(f"`{text(h.kernel)}`" + (" (stale)" if h.stale else ""))
        body.append([_chapter_cell(h.chapter, link), kernel, h.figure, h.versus] + ([h.gpu] if len(gpus) > 1 else []))
    caption = ""
    if len(gpus) == 1:
        spec = roofline.find_spec(gpus[0])
        caption = f"On the {text(spec.name if spec else gpus[0])}, from results/{text(gpus[0])}:\n\n"
    return caption + md_table(head, body)


def _chapter_cell(chapter: str, link: Path | None):
    """The chapter's name in code; with ``link`` (the checkout), a link to its page named by its short title."""
    if link is not None and CHAPTER_NAME.fullmatch(chapter):
        title = re.sub(r"[<>`\\]", "", short_title(link, chapter))
        return Markup(f"{{doc}}`{title} <{chapter}>`")
    return Markup(f"`{text(chapter)}`")


def chapter_names(root: Path) -> list[str]:
    """The chapters of ``<root>/book``, in order."""
    return [p.stem for p in sorted((Path(root) / "book").glob(CHAPTER_GLOB))]


def chapters_markdown(root: Path, *, link: bool = False) -> str:
    """What each chapter teaches, one line each, every chapter of the book named (in the README, by its name; on
    the front page, by a link to it)."""
    body = [[_chapter_cell(c, Path(root) if link else None), Markup(rule(c).teaches) if c in CHAPTERS else "-"]
            for c in chapter_names(root)]
    return md_table(["chapter", "what it teaches"], body)


def with_block(readme: str, begin: str, end: str, table: str) -> str:
    """``readme`` with the block between ``begin`` and ``end`` replaced by ``table``; ValueError without them."""
    start, stop = readme.find(begin), readme.find(end)
    if start < 0 or stop < start:
        raise ValueError(f"no block {begin} ... {end}")
    return readme[: start + len(begin)] + "\n" + table + "\n" + readme[stop:]



def default_figure(result) -> tuple[Panel, ...]:
    """A chapter's figure when its rule names none: one panel per dtype, the bounding throughput (GB/s or TFLOP/s)
    against problem size, or against row length where the race keeps the size and varies the shape."""
    xlabel, _ = x_axis(result)
    spec = result.spec
    panels = []
    for dtype in sorted({r.dtype for r in result.rows if r.ms_median}):
        first = next(r for r in result.rows if r.dtype == dtype and r.ms_median)
        unit = per_second(first.as_dict(), spec)[1]
        panels.append(Panel(dtype, "last" if xlabel == ROW_LENGTH else "size",
                            "gbps" if unit == "GB/s" else "tflops", xlabel if xlabel == ROW_LENGTH else PROBLEM_SIZE,
                            lambda d, row, dtype=dtype: row.dtype == dtype, ceiling=unit == "GB/s"))
    return tuple(panels)


def race_figure(chapter: str, *, gpu: str | None = None, root: Path | None = None,
                panels: tuple[Panel, ...] | None = None) -> RaceFigure:
    """A chapter's race figure from ``results/<gpu>/bench/<chapter>.csv``, with the panels its rule names
    (:data:`CHAPTERS`) unless given: the one call a chapter's plot cell makes, ``labmagic.race_figure("07_attention")``.
    Without ``gpu``: this machine's GPU where it measured the chapter (a chapter run on a GPU draws the rows its own
    tables just showed), else the book's GPU, else the first GPU that measured it (a reader without a GPU sees the
    book's)."""
    from ..benchmark.race import load_result
    from ..paths import check_chapter_name, repo_root

    check_chapter_name(chapter)
    root = Path(root or repo_root())
    found = {p.parent.parent.name: p for p in sorted(root.glob(f"results/*/bench/{chapter}.csv"))}
    if not found:
        return RaceFigure(chapter, message=f"{chapter}: no measured rows yet: run the races on a GPU")
    slug = gpu or next(s for s in (device_slug(), BOOK_GPU, *found) if s in found)
    if slug not in found:
        raise LabError(f"{chapter}: no results from {gpu!r} (results/*/bench/{chapter}.csv: {', '.join(found)})")
    ceilings = roofline.load_ceilings(slug, root / "results" / slug / "ceilings.json")
    result = load_result(found[slug], ceilings=ceilings)
    this = rule(chapter)
    axes = {n: names.split(" x ") for n, names in this.axes.items()}
    return draw_race_figure(result, panels or this.figure or default_figure(result), axes=axes,
                            title=f"{chapter} on {result.device}")
