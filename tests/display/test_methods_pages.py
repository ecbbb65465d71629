"""The Methods pages' generated parts, drawn from a scratch ``results/`` and ``book/``: what the data says reaches the
page, nothing else does, and data no writer produces stops the build with one line naming the file."""

from __future__ import annotations

import base64
import csv
import json
import re

import nbformat
import pytest

from labmagic.benchmark.ncu_check import COLUMNS as NSIGHT_COLUMNS
from labmagic.benchmark.write_back import COLUMNS as WRITE_BACK_COLUMNS
from labmagic.benchmark.write_back import format_row
from labmagic.compiler.backend import refusal
from labmagic.display import methods_pages as pages
from labmagic.errors import LabError
from labmagic.store.bench_csv import write_rows

CEILINGS = {"copy_gbps": 4000.0, "add_gbps": 4100.0, "read_gbps": 4200.0, "peak_gbps": 4200.0,
            "matmul_tflops": {"fp32": 50.0, "bf16": 700.0}, "skipped": {"fp8": "RuntimeError: no fp8 here"},
            "method": {"copy_mib": 2048, "matmul_n": 8192, "timer": "cuda_event"},
            "provenance": {"gpu": "NVIDIA H200", "driver": "580.1", "git_commit": "abc1234"}}


@pytest.fixture
def root(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "book").mkdir()
    return tmp_path


def _ceilings(root, data, slug="nvidia-h200"):
    path = root / "results" / slug / "ceilings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def _images(markdown: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", markdown)]


def test_ceilings_sit_beside_the_spec_sheet_with_how_they_were_measured(root):
    _ceilings(root, CEILINGS)
    _ceilings(root, dict(CEILINGS, skipped={}), slug="acme-gpu")  # no spec sheet known
    md = pages.generated("ceilings", root)
    assert "| memory: copy (Tensor.copy&#95;), GB/s | 4,000 | 4,800 | 83% |" in md
    assert "| memory: peak: the best of the three, GB/s | 4,200 | 4,800 | 88% |" in md
    assert "| matmul bf16 (cuBLAS, n x n x n), TFLOP/s | 700 | 989.4 | 71% |" in md
    assert "on NVIDIA H200, driver 580.1, commit abc1234" in md and "matmul n = 8192" in md
    assert "Not measured: fp8 (RuntimeError: no fp8 here)." in md
    acme = md[md.index("**acme-gpu**"):]
    assert "spec sheet (none known)" in acme and "| matmul fp32 (cuBLAS, n x n x n), TFLOP/s | 50 | - | - |" in acme


@pytest.mark.parametrize("data, what", [
    (dict(CEILINGS, copy_gbps="fast"), "copy_gbps is 'fast', not a measurement"),
    (dict(CEILINGS, matmul_tflops={"bf16": -1}), "matmul_tflops['bf16'] is -1, not a measurement"),
    ('{"copy_gbps": NaN, "matmul_tflops": {}}', "copy_gbps is nan, not a measurement"),
    ("[1, 2", "not JSON"),
    (dict(CEILINGS, provenance="me"), "provenance is not an object"),
])
def test_a_ceilings_file_calibrate_does_not_write_stops_the_page_naming_it(root, data, what):
    _ceilings(root, data)
    with pytest.raises(LabError, match=re.escape(f"results/nvidia-h200/ceilings.json: {what}")):
        pages.generated("ceilings", root)


def test_values_from_results_are_inert_text(root):
    _ceilings(root, dict(CEILINGS, matmul_tflops={"<img src=x onerror=alert(1)>": 1.0},
                         skipped={"{eval-rst}": "`x <javascript:alert(1)>`_"}))
    md = pages.generated("ceilings", root)
    assert "<img" not in md and "{eval-rst}" not in md and "`x" not in md
    assert "&#60;img src=x onerror=alert(1)&#62;" in md
    # Names are refused on write and read (labmagic.store.schema.row_problem); the dtype is free text and shown.
    hostile = "<script>alert(1)</script> ```{literalinclude} /etc/passwd```"
    write_rows(root / "results" / "nvidia-h200" / "bench" / "01_add.csv",
               [_row("01_add", "cuda_add", "64", 0.01, 64, 768, dtype=hostile)])
    md = pages.generated("book-roofline", root)
    assert "<script" not in md and "{literalinclude}" not in md and "&#60;script&#62;alert(1)" in md


def _row(chapter, variant, shape, ms, flops, nbytes, status="ok", dtype="float32"):
    return dict(chapter=chapter, variant=variant, backend=variant.split("_")[0], shape=shape, dtype=dtype,
                status=status, flops=flops, nbytes=nbytes, ms_median=ms, tflops=flops / ms / 1e9,
                gbps=nbytes / ms / 1e6, ceiling_pct=50.0, gpu="NVIDIA H200", timestamp="2026-11-28T10:00:00+00:00")


def test_the_book_roofline_puts_each_chapters_fastest_variant_at_its_largest_problem_on_the_measured_roofs(root):
    _ceilings(root, CEILINGS)
    bench = root / "results" / "nvidia-h200" / "bench"
    n, big = 2**20, 2**28
    write_rows(bench / "01_add.csv", [
        _row("01_add", "torch", str(big), 0.80, big, 12 * big),
        _row("01_add", "cuda_fast", str(big), 0.75, big, 12 * big),
        _row("01_add", "cuda_faster_small", str(n), 0.001, n, 12 * n),        # fastest, but not the largest problem
        _row("01_add", "cuda_broken", str(big), 0.10, big, 12 * big, status="mismatch"),  # fast and wrong: left out
    ])
    m = 4096
    write_rows(bench / "02_gemm.csv", [_row("02_gemm", "torch", f"{m}x{m}x{m}", 3.0, 2 * m**3, 12 * m**2)])
    md = pages.generated("book-roofline", root)
    rows = {line.split(" | ")[0].strip("| "): line for line in md.splitlines() if line.startswith("| 0")}
    assert set(rows) == {"01_add", "02_gemm"}
    assert rows["01_add"].startswith(f"| 01_add | fp32 | 0.0833 | {2**28 / 0.75e9:.4g} | memory | 50.0% | cuda_fast |")
    assert rows["02_gemm"].startswith("| 02_gemm | fp32 | 683 | ")  # 2 * 4096^3 / (12 * 4096^2) FLOP/byte
    assert "| compute |" in rows["02_gemm"]
    (png,) = _images(md)
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000


def test_without_ceilings_or_rows_the_pages_say_what_to_run(root):
    assert "`labmagic calibrate`" in pages.generated("ceilings", root)
    assert "run `labmagic calibrate` and `labmagic sweep`" in pages.generated("book-roofline", root)
    assert "`labmagic sweep --timer nsight`" in pages.generated("nsight-agreement", root)
    assert "No chart of 01_vector_add yet" in pages.generated("chapter-chart", root, "01_vector_add")
    assert "no chapters yet" in pages.generated("porting-inventory", root)
    assert "Not measured yet: `python benchmarks/flush_write_back.py`" in pages.generated("flush-write-back", root)


def _nsight(root, rows, header=NSIGHT_COLUMNS):
    path = root / "results" / "nvidia-h200" / "nsight_check" / "01_add.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        csv.writer(handle, lineterminator="\n").writerows([header, *rows])
    return path


def test_the_nsight_cross_check_counts_verdicts_and_names_the_worst_judged_row(root):
    _nsight(root, [("torch", "1048576", "float32", 0.0045, 0.0053, 0.85, "short (<50 us, launch-bound)", "c", "t"),
                   ("torch", "268435456", "float32", 0.731, 0.729, 1.003, "agrees", "c", "t"),
                   ("cuda_naive", "268435456", "float32", 0.99, 0.94, 1.053, "disagrees", "c", "t")])
    md = pages.generated("nsight-agreement", root)
    assert ("3 rows from 01_add: 1 agree within 5%, 1 disagree, 1 are shorter than 50 µs on both timers and are "
            "not judged; the judged row farthest from Nsight is cuda_naive at 268435456 (+5.3%)") in md
    assert len(_images(md)) == 1


@pytest.mark.parametrize("rows, header, what", [
    ([("torch", "64", "float32", "0.1", "0.1", "1", "fine", "c", "t")], NSIGHT_COLUMNS, ", line 2: verdict 'fine'"),
    ([("torch", "64", "float32", "soon", "0.1", "1", "agrees", "c", "t")], NSIGHT_COLUMNS,
     ", line 2: event_ms is 'soon', not a time"),
    ([("torch", "64")], NSIGHT_COLUMNS, ", line 2: 2 fields where the header has 9"),
    ([], ("variant", "ms"), ": the header is not labmagic.benchmark.ncu_check.COLUMNS"),
])
def test_a_cross_check_csv_no_sweep_writes_stops_the_page_naming_file_and_line(root, rows, header, what):
    _nsight(root, rows, header)
    with pytest.raises(LabError, match=re.escape(f"results/nvidia-h200/nsight_check/01_add.csv{what}")):
        pages.generated("nsight-agreement", root)


WRITE_BACK = {"kernel": "torch.add float32", "n": 16777216, "kernel_bytes": 201326592, "l2_bytes": 52428800,
              "flush_bytes": 104857600, "pairs": 200, "after_read_us": 44.5, "after_zero_us": 51.25,
              "write_back_us": 6.5, "write_back_low_us": 6.0, "write_back_high_us": 7.125, "read_flush_us": 30.0,
              "zero_flush_us": 28.0, "gpu": "NVIDIA H200", "driver": "580.1", "cuda": "13.0", "torch": "2.11.0",
              "git_commit": "abc1234", "timestamp": "2026-12-04T19:00:00+00:00"}


def _write_back(root, rows, header=WRITE_BACK_COLUMNS):
    path = root / "results" / "nvidia-h200" / "flush_write_back.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        csv.writer(handle, lineterminator="\n").writerows([header, *rows])
    return path


def test_the_write_back_figure_is_the_csvs_with_its_provenance(root):
    _write_back(root, [list(format_row(WRITE_BACK).values())])
    md = pages.generated("flush-write-back", root)
    assert ("torch.add float32 of 16,777,216 elements (201 MB moved) took **44.50 µs** after the L2 was flushed by "
            "reading and **51.25 µs** after `zero_()`: the write-back of the dirty lines added **+6.50 µs** (the "
            "median of 200 paired differences, 95% interval +6.00 to +7.12 µs), +15% of the kernel's time") in md
    assert "Both flushes used a 100 MiB buffer (the L2: 50 MiB); reading it took 30.00 µs, zeroing it 28.00 µs" in md
    assert "on NVIDIA H200, driver 580.1, CUDA 13.0, torch 2.11.0, commit abc1234, at 2026-12-04T19:00:00+00:00" in md
    assert "`results/nvidia-h200/flush_write_back.csv`" in md and "Not measured" not in md


def test_a_write_back_row_without_an_interval_or_with_hostile_text_reads_as_plain_text(root):
    hostile = dict(WRITE_BACK, kernel="<img src=x onerror=alert(1)>", write_back_us=-0.5, write_back_low_us=None,
                   write_back_high_us=None, git_commit="{eval-rst}")
    _write_back(root, [list(format_row(hostile).values())])
    md = pages.generated("flush-write-back", root)
    assert "<img" not in md and "{eval-rst}" not in md and "&#60;img src=x onerror=alert(1)&#62;" in md
    assert "added **-0.50 µs** (the median of 200 paired differences)" in md


@pytest.mark.parametrize("change, what", [
    ({"after_zero_us": "soon"}, ", line 2: after_zero_us is 'soon', not a time"),
    ({"read_flush_us": "-3"}, ", line 2: read_flush_us is '-3', not a time"),
    ({"write_back_us": "nan"}, ", line 2: write_back_us is 'nan', not a time"),
    ({"pairs": "0"}, ", line 2: pairs is '0', not a positive count"),
    ({"n": "1e9"}, ", line 2: n is '1e9', not a positive count"),
])
def test_a_write_back_csv_the_script_does_not_write_stops_the_page_naming_file_and_line(root, change, what):
    _write_back(root, [list(dict(format_row(WRITE_BACK), **change).values())])
    with pytest.raises(LabError, match=re.escape(f"results/nvidia-h200/flush_write_back.csv{what}")):
        pages.generated("flush-write-back", root)


@pytest.mark.parametrize("rows, header, what", [
    ([("torch.add", "64")], WRITE_BACK_COLUMNS, f", line 2: 2 fields where the header has {len(WRITE_BACK_COLUMNS)}"),
    ([], ("kernel", "us"), ": the header is not labmagic.benchmark.write_back.COLUMNS"),
])
def test_a_write_back_csv_of_another_shape_stops_the_page_naming_it(root, rows, header, what):
    _write_back(root, rows, header)
    with pytest.raises(LabError, match=re.escape(f"results/nvidia-h200/flush_write_back.csv{what}")):
        pages.generated("flush-write-back", root)


def test_the_porting_inventory_counts_what_a_hip_port_rewrites_in_code_cells_only(root):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("Prose about asm volatile, __shfl_xor_sync and wgmma. is not code."),
        nbformat.v4.new_code_cell('%%cuda_kernel\nextern "C" __global__ void __cluster_dims__(2, 1, 1) k(float* x) {\n'
                                  '  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global [%0], [%1];");\n'
                                  '  float v = __shfl_xor_sync(0xffffffff, x[0], 16);\n'
                                  '  v += __shfl_down_sync(0xffffffff, v, 8);\n  asm("wgmma.fence.sync.aligned;");\n}'),
        nbformat.v4.new_code_cell("@triton.jit\ndef kernel(x_ptr):\n    pass"),
    ]
    nbformat.write(nb, root / "book" / "01_add.ipynb")
    md = pages.generated("porting-inventory", root)
    assert "| {doc}`01_add </book/01_add>` | 1 | 2 | 2 | 1 | 1 | 1 | 1 |" in md


def test_a_chapter_chart_is_its_own_plots_inside_results(root, tmp_path_factory):
    bench = root / "results" / "nvidia-h200" / "bench"
    bench.mkdir(parents=True)
    for name in ("01_add.png", "01_add.float32.png", "01_addition.png", "02_gemm.png"):
        (bench / name).write_bytes(b"\x89PNG")
    md = pages.generated("chapter-chart", root, "01_add")
    assert re.findall(r"\]\((\S+)\)", md) == ["/results/nvidia-h200/bench/01_add.float32.png",
                                              "/results/nvidia-h200/bench/01_add.png"]
    outside = tmp_path_factory.mktemp("elsewhere") / "secret.png"
    outside.write_bytes(b"\x89PNG")
    (bench / "01_add.x.png").symlink_to(outside)
    with pytest.raises(LabError, match="links out of results/"):
        pages.generated("chapter-chart", root, "01_add")


def test_the_rocm_refusal_is_the_backends_own_words(root):
    assert pages.generated("hip-refusal", root) == (
        f"```text\nBackendUnavailable: {refusal(pages.EXAMPLE_HIP)}\n```")


@pytest.mark.parametrize("name, argument, what", [
    ("roofline", None, "no generated part 'roofline' (known: ceilings, book-roofline"),
    ("chapter-chart", None, "chapter-chart needs a chapter name, like 01_vector_add, not None"),
    ("chapter-chart", "../../etc", "chapter-chart needs a chapter name, like 01_vector_add, not '../../etc'"),
    ("ceilings", "nvidia-h200", "ceilings takes no argument, got 'nvidia-h200'"),
])
def test_a_page_asking_for_a_part_that_does_not_exist_is_one_line(root, name, argument, what):
    with pytest.raises(LabError, match=re.escape(what)):
        pages.generated(name, root, argument)
