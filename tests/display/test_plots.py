"""The race's plots (:mod:`labmagic.display.plots`), drawn on CPU from synthetic results: every variant has a
style of its own, a race of one size in many shapes is plotted against row length, and the figure is readable at
the book's 784 px text column."""

from __future__ import annotations

import re
import shutil
import struct

import pytest
from matplotlib.legend import Legend
from matplotlib.text import Text
from matplotlib.transforms import Bbox
from sitebuild import ROOT

from labmagic.benchmark import roofline
from labmagic.benchmark.race import BenchResult
from labmagic.display import chapters, plots
from labmagic.store.schema import Row

#: Chapter 02's thirteen variants, the reference first, as its race names them.
SGEMM_VARIANTS = ["torch", "cuda_naive", "cuda_coalesced", "cuda_smem", "cuda_blocktile_1d", "cuda_blocktile_2d",
                  "cuda_vectorized", "cuda_warptile", "cuda_async", "triton", "pallas", "cuda_autotuned",
                  "cuda_streamk"]
#: Chapter 03's fifteen variants, as its race names them.
SOFTMAX_VARIANTS = ["torch", "cuda_naive", "cuda_online", "cuda_vec", "cuda_warp", "cuda_smem", "cuda_bulk",
                    "cuda_pipe", "cuda_best", "triton", "pallas", "gluon", "helion", "tilelang", "cutedsl"]
#: Chapter 07's 28 bf16 variants: more than the legend quarter holds.
ATTENTION_VARIANTS = [f"{v}{causal}" for causal in ("", "_causal") for v in (
    "torch_naive", "sdpa_flash", "sdpa_efficient", "sdpa_cudnn", "sdpa_math", "cuda_fa1", "cuda_flash", "cuda_wgmma",
    "cuda_wgmma_async", "cuda_wgmma_ws", "cuda_wgmma_pingpong", "triton_flash", "pallas_flash")] + [
    "cuda_decode", "triton_decode"]
#: Chapter 03's shapes: 2^28 elements as 262144x1024 ... 1024x262144.
SOFTMAX_SHAPES = [f"{2**28 // 2**e}x{2**e}" for e in range(10, 19)]


def _result(variants, shapes, dtypes=("float32",)) -> BenchResult:
    rows = []
    for dtype in dtypes:
        for shape in shapes:
            for i, name in enumerate(variants):
                ms = 0.5 + 0.1 * i
                rows.append(Row("test_chapter", name, name.split("_")[0], shape, dtype, "ok", flops=2e9, nbytes=4e9,
                                ms_median=ms, tflops=2e9 / ms / 1e9, gbps=4e9 / ms / 1e6,
                                vs_ref=0.5 / ms, peak_mem_bytes=2**30))
    return BenchResult("test_chapter", rows, True, "NVIDIA H200", roofline.find_spec("NVIDIA H200"), None)


def _axes(fig):
    """The figure's axes by title (the legend panel has none)."""
    return {ax.get_title(): ax for ax in fig.axes}


def test_eight_variants_have_eight_styles_and_the_reference_is_black_dashed():
    eight = SGEMM_VARIANTS[:plots.MAX_LEGEND]
    fig = plots.figure(_result(eight, ["512x512x512", "1024x1024x1024"]))
    lines = {ln.get_label(): ln for ln in _axes(fig)["latency (median)"].get_lines()}
    assert set(lines) == set(eight)
    looks = {(ln.get_color(), ln.get_marker(), ln.get_linestyle()) for ln in lines.values()}
    assert len(looks) == len(eight)
    assert (lines["torch"].get_color(), lines["torch"].get_linestyle()) == ("black", "--")
    assert all(ln.get_color() != "black" for name, ln in lines.items() if name != "torch")


def test_past_eight_variants_the_legend_names_families_and_every_variant_stands_behind_one_entry():
    """Chapter 02's thirteen: one entry a family, its fastest named for the rest ("cuda_x (+10 cuda)"), the others
    thin in its colour; the reference stays black and dashed."""
    fig = plots.figure(_result(SGEMM_VARIANTS, ["512x512x512", "1024x1024x1024"]))
    lines = _axes(fig)["latency (median)"].get_lines()
    labelled = {ln.get_label(): ln for ln in lines if not ln.get_label().startswith("_")}
    assert len(lines) == len(SGEMM_VARIANTS) and 0 < len(labelled) <= plots.MAX_LEGEND
    behind = [1 + int(m.group(1)) if (m := re.search(r"\(\+(\d+) ", label)) else 1 for label in labelled]
    assert sum(behind) == len(SGEMM_VARIANTS)
    (cuda,) = [ln for label, ln in labelled.items() if label.endswith(" cuda)")]
    thin = [ln for ln in lines if ln.get_label().startswith("_") and ln.get_color() == cuda.get_color()]
    assert len(thin) == len([v for v in SGEMM_VARIANTS if v.startswith("cuda")]) - 1
    ref = labelled["torch"]
    assert (ref.get_color(), ref.get_linestyle()) == ("black", "--")


def test_styles_follow_the_race_order_not_the_rows_a_figure_happens_to_have():
    full = plots.variant_styles(SGEMM_VARIANTS, ref="torch")
    assert full == plots.variant_styles(SGEMM_VARIANTS, ref="torch")
    assert len({tuple(s.values()) for s in plots.variant_styles([f"v{i}" for i in range(70)]).values()}) == 70
    # A dtype's figure without cuda_naive keeps every other variant's colour when told the race's order.
    without = _result([v for v in SGEMM_VARIANTS[:plots.MAX_LEGEND] if v != "cuda_naive"], ["512x512x512"])
    fig = plots.figure(without, variants=SGEMM_VARIANTS)
    for ln in _axes(fig)["latency (median)"].get_lines():
        assert ln.get_color() == full[ln.get_label()]["color"]


def test_one_size_in_many_shapes_is_plotted_against_row_length():
    fig = plots.figure(_result(["torch", "cuda_naive", "triton"], list(reversed(SOFTMAX_SHAPES))))
    ax = _axes(fig)
    for title in ("bandwidth (median)", "peak extra memory per call"):
        assert ax[title].get_xlabel() == "row length (elements)"
        for ln in ax[title].get_lines():
            assert list(ln.get_xdata()) == [2**e for e in range(10, 19)]


def test_row_length_races_plot_gbps_against_the_copy_ceiling():
    result = _result(["torch", "cuda_naive", "triton"], SOFTMAX_SHAPES)
    result.ceilings = roofline.Ceilings(copy_gbps=4256.0, peak_gbps=4471.0)
    fig = plots.figure(result)
    ax = _axes(fig)["bandwidth (median)"]
    assert ax.get_ylabel() == "GB/s" and ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    # every variant's GB/s as the rows give it (0.5 ms and up per 4 GB), and the ceiling as a level line
    assert list(lines["cuda_naive"].get_ydata()) == pytest.approx([4e9 / 0.6 / 1e6] * len(SOFTMAX_SHAPES))
    assert set(lines["copy ceiling: 4256 GB/s"].get_ydata()) == {4256.0}
    assert ax.get_ylim()[1] >= 4256.0
    fig.canvas.draw()
    shown = [t.get_text() for t in fig.findobj(Text) if t.get_visible()]
    assert shown.count("copy ceiling: 4256 GB/s") == 1  # in the legend panel, with the roofs, not among the variants
    # Growing sizes keep latency: the ceiling belongs to the bandwidth view only.
    sizes = _result(["torch"], ["512x512x512", "1024x1024x1024"])
    sizes.ceilings = result.ceilings
    latency = _axes(plots.figure(sizes))["latency (median)"]
    assert "copy ceiling: 4256 GB/s" not in {ln.get_label() for ln in latency.get_lines()}


def test_growing_sizes_keep_the_problem_size_axis():
    fig = plots.figure(_result(["torch", "cuda_naive"], ["512x512x512", "1024x1024x1024", "2048x2048x2048"]))
    ax = _axes(fig)["latency (median)"]
    assert ax.get_xlabel() == "problem size (elements)"
    assert list(ax.get_lines()[0].get_xdata()) == [2**27, 2**30, 2**33]


def _png_width(data: bytes) -> int:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">I", data[16:20])[0]


@pytest.mark.parametrize("variants", [SGEMM_VARIANTS, ["torch", "cuda_naive"], ATTENTION_VARIANTS])
def test_fits_the_book_column_with_fonts_of_8_pt_or_more(variants):
    result = _result(variants, SOFTMAX_SHAPES)
    assert _png_width(plots.png_bytes(result)) <= 1000
    fig = plots.figure(result)
    assert fig.get_figwidth() * plots.DPI <= 1000
    fig.canvas.draw()  # lays out ticks, so their labels exist
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text()]
    tick_labels = [t for ax in fig.axes for t in ax.get_xticklabels() + ax.get_yticklabels() if t.get_text()]
    assert tick_labels and all(t.get_fontsize() >= 8 for t in tick_labels)
    small = {(t.get_text(), t.get_fontsize()) for t in texts if t.get_fontsize() < 8}
    assert not small


def test_the_legend_has_a_panel_of_its_own():
    fig = plots.figure(_result(SGEMM_VARIANTS[:plots.MAX_LEGEND], ["512x512x512", "1024x1024x1024"]))
    data_axes = [ax for ax in fig.axes if ax.get_title()]
    assert len(data_axes) == 3 and all(ax.get_legend() is None for ax in data_axes)
    (panel,) = [ax for ax in fig.axes if not ax.get_title()]
    assert not panel.get_lines()
    shown = {t.get_text() for t in panel.findobj(Text)}
    assert set(SGEMM_VARIANTS[:plots.MAX_LEGEND]) <= shown
    assert any(s.startswith("spec: 4800 GB/s") for s in shown)


@pytest.mark.parametrize("variants", [ATTENTION_VARIANTS, SOFTMAX_VARIANTS, SGEMM_VARIANTS, ["torch", "cuda_naive"]])
def test_the_variants_and_the_ceilings_cover_nothing(variants):
    """Each legend lies inside its own panel (a row of its own may use the figure's whole width), clear of the other
    legend and of every data panel, from two variants to chapter 07's 28 (which get that row under the panels)."""
    result = _result(variants, SOFTMAX_SHAPES)
    result.ceilings = roofline.Ceilings(copy_gbps=4292.0, peak_gbps=4393.0)
    fig = plots.figure(result)
    fig.canvas.draw()
    assert fig.get_figwidth() * plots.DPI <= 1000
    panels = [ax for ax in fig.axes if not ax.get_title()]
    legends = [(ax, a.get_window_extent()) for ax in panels for a in ax.get_children() if isinstance(a, Legend)]
    assert len(legends) == 2 and len(panels) == 1  # past eight variants the legend names families
    (_, first), (_, second) = legends
    assert not first.overlaps(second)
    width = fig.get_figwidth() * plots.DPI
    for ax, box in legends:
        panel = ax.get_window_extent()
        if ax.get_subplotspec().colspan.stop - ax.get_subplotspec().colspan.start == 2:  # a row of its own
            panel = Bbox.from_extents(0, panel.y0, width, panel.y1)
        assert all(panel.contains(*corner) for corner in box.corners())
        assert not any(box.overlaps(data.get_window_extent()) for data in fig.axes if data.get_title())


# ------------------------------------------------------------------------------------------- a chapter's race figure

ATTENTION_CSV = ROOT / "results" / "nvidia-h200" / "bench" / "07_attention.csv"


@pytest.fixture
def attention_checkout(tmp_path):
    """A checkout holding chapter 07's committed H200 rows and that GPU's measured ceilings."""
    bench = tmp_path / "results" / "nvidia-h200" / "bench"
    bench.mkdir(parents=True)
    shutil.copy(ATTENTION_CSV, bench / ATTENTION_CSV.name)
    shutil.copy(ROOT / "results" / "nvidia-h200" / "ceilings.json", bench.parent / "ceilings.json")
    return tmp_path


def _legend_entries(ax) -> list[str]:
    legend = ax.get_legend()
    return [t.get_text() for t in legend.get_texts()] if legend else []


def test_chapter_07_figure_is_readable_in_the_column(attention_checkout):
    """labmagic.race_figure("07_attention") from chapter 07's CSV: three panels, at most two across, a legend of at
    most eight families under each, every font 9 pt or more, 780 px wide (the 784 px column shows it at its size)."""
    drawn = chapters.race_figure("07_attention", root=attention_checkout)
    fig = drawn.figure
    fig.canvas.draw()
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == [p.title for p in chapters.ATTENTION_FIGURE]
    assert len({round(ax.get_position().x0, 2) for ax in panels}) <= 2
    assert fig.get_figwidth() * plots.RACE_DPI <= 784 and _png_width(drawn.png()) <= 784
    for ax in panels:
        entries = _legend_entries(ax)
        assert 0 < len(entries) <= plots.MAX_LEGEND, (ax.get_title(), entries)
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text()]
    assert texts and min(t.get_fontsize() for t in texts) >= 9
    non_causal, causal, decode = panels
    assert "cuda_wgmma_pingpong (+5 cuda)" in _legend_entries(non_causal)  # the cuda family's fastest at 16k
    assert not any(e.split()[0].endswith("_causal") for e in _legend_entries(non_causal))
    assert all(e.split()[0].endswith("_causal") for e in _legend_entries(causal))
    assert "copy ceiling: 4,292 GB/s" in _legend_entries(decode)
    assert decode.get_ylabel() == "GB/s" and non_causal.get_ylabel() == "TFLOP/s"
    # the bold line of a family is that family's fastest at the longest sequence, from the CSV's own rows
    best = {ln.get_label(): ln for ln in non_causal.get_lines() if not ln.get_label().startswith("_")}
    assert max(best["cuda_wgmma_pingpong (+5 cuda)"].get_xdata()) == 16384
    assert repr(drawn).startswith("07_attention on NVIDIA H200: prefill, d = 128, non-causal;")


def test_a_chapter_run_on_a_gpu_draws_that_gpus_rows_and_a_reader_without_one_the_books(attention_checkout,
                                                                                           monkeypatch):
    """Chapter 07 measured on the H200 and on an H100: run on the H100 (its sweep), the figure draws the rows its own
    tables just showed, FA3 among them; without a GPU, or on a GPU that measured nothing, the book's H200; ``gpu=``
    picks either."""
    h100 = attention_checkout / "results" / "nvidia-h100-80gb-hbm3" / "bench"
    h100.mkdir(parents=True)
    shutil.copy(ROOT / "results" / "nvidia-h100-80gb-hbm3" / "bench" / ATTENTION_CSV.name, h100 / ATTENTION_CSV.name)
    for here, drawn_on in (("nvidia-h100-80gb-hbm3", "NVIDIA H100 80GB HBM3"), ("cpu", "NVIDIA H200"),
                           ("nvidia-a100-sxm4-80gb", "NVIDIA H200")):
        monkeypatch.setattr(chapters, "device_slug", lambda here=here: here)
        drawn = chapters.race_figure("07_attention", root=attention_checkout)
        assert repr(drawn).startswith(f"07_attention on {drawn_on}:"), (here, repr(drawn))
        families = " ".join(_legend_entries(drawn.figure.axes[0]))
        assert ("fa3" in families) == (drawn_on != "NVIDIA H200")  # the H200's rows are from before the peers
    assert repr(chapters.race_figure("07_attention", root=attention_checkout, gpu="nvidia-h200")).startswith(
        "07_attention on NVIDIA H200:")


def test_families_past_eight_fold_into_one_entry():
    """Twelve backends in one panel: seven families named, the rest one grey entry; the eighth slot is theirs."""
    rows = [Row("c", f"{backend}_k{i}", backend, f"{n}", "float32", "ok", ms_median=1.0 / (j + 1 + i),
                tflops=float(j + 1 + i), gbps=1.0)
            for j, backend in enumerate(f"b{j:02d}" for j in range(12)) for i in range(2) for n in (1024, 2048)]
    result = BenchResult("c", rows, True, "NVIDIA H200", roofline.find_spec("NVIDIA H200"), None)
    fig = plots.race_figure(result, [plots.Panel("all", "size", "tflops")]).figure
    entries = _legend_entries(fig.axes[0])
    assert len(entries) == plots.MAX_LEGEND and entries[-1] == "10 more variants"
    assert entries[0] == "b11_k1 (+1 b11)"  # the best family first, named by its fastest


def test_a_chapter_without_rows_says_so(tmp_path):
    drawn = chapters.race_figure("07_attention", root=tmp_path)
    assert drawn.figure is None and drawn._repr_png_() is None
    assert repr(drawn) == "07_attention: no measured rows yet: run the races on a GPU"
