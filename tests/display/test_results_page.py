"""The Results page and the README headline table are generated from results/*/bench/*.csv, with provenance and
stale marks; ``labmagic results --stale`` lists the same stale rows."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from sitebuild import CHAPTERS, ROOT, build_site, page_text, run_command, scratch_checkout

from labmagic.cli import results as results_cli
from labmagic.display import chapters
from labmagic.display import results_page as results_pages
from labmagic.errors import LabError
from labmagic.store import catalog, staleness
from labmagic.store.bench_csv import bench_csv_path, write_rows

H200 = dict(gpu="NVIDIA H200", driver="580.95.05", cuda="13.0", torch="2.13.0", triton="3.9.0", jax="0.10.2",
            git_commit="0123456789ab", timestamp="2026-11-28T10:00:00+00:00")
A100 = dict(H200, gpu="NVIDIA A100-SXM4-80GB", driver="570.86.15", timestamp="2026-11-20T10:00:00+00:00")


def _rows(gpu, bandwidth, naive_hash):
    rows = []
    for n in (2**20, 2**28):
        for variant, backend, efficiency in (("torch", "torch", 0.90), ("cuda_naive", "cuda", 0.85),
                                             ("cuda_float4", "cuda", 0.93)):
            ms = 12 * n / (bandwidth * efficiency) * 1e3
            rows.append(dict(chapter="01_vector_add", variant=variant, backend=backend, shape=str(n), dtype="float32",
                             status="ok", ms_median=ms, ms_min=ms * 0.98, ms_max=ms * 1.04, gbps=12 * n / ms / 1e6,
                             tflops=n / ms / 1e9, sol_pct=100 * efficiency, vs_ref=0.90 / efficiency,
                             source_hash=naive_hash if variant == "cuda_naive" else "f00d", **gpu))
    rows.append(dict(rows[-1], variant="pallas", backend="pallas", status="oom", ms_median="", gbps="", sol_pct=""))
    return rows


@pytest.fixture
def results_repo(tmp_path, monkeypatch):
    """A checkout with chapter 01 and results from two GPUs; the A100 measured an older cuda_naive."""
    root = scratch_checkout(tmp_path / "repo")
    monkeypatch.setenv("LABMAGIC_ROOT", str(root))
    write_rows(bench_csv_path("01_vector_add", "nvidia-h200"), _rows(H200, 4.8e12, "beef"))
    write_rows(bench_csv_path("01_vector_add", "nvidia-a100-sxm4-80gb"), _rows(A100, 2.0e12, "dead"))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([1, 2, 3], [1, 4, 9])
    fig.savefig(bench_csv_path("01_vector_add", "nvidia-h200").with_suffix(".png"))
    plt.close(fig)
    return root


def test_stale_rows_are_the_variants_whose_source_moved_on(results_repo, capsys):
    df = catalog.load(results_repo)
    reasons = staleness.stale_reasons(df, results_repo)
    stale = df[reasons != ""]
    assert set(zip(stale["gpu_slug"], stale["variant"], strict=True)) == {("nvidia-a100-sxm4-80gb", "cuda_naive")}
    assert run_command(results_cli, ["--stale"]) == 1
    out = capsys.readouterr().out
    assert "nvidia-a100-sxm4-80gb  01_vector_add  cuda_naive  1048576" in out and "2 stale row(s) of 14" in out


def test_a_changed_chapter_makes_its_results_stale(results_repo, capsys):
    manifest = results_repo / "results" / "nvidia-h200" / "notebooks" / "01_vector_add.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"status": "passed", "input_hash": "not-the-current-one",
                                    "started": "2026-11-28T09:00:00+00:00"}))
    reasons = staleness.stale_reasons(catalog.load(results_repo), results_repo)
    assert (reasons.str.startswith("chapter changed since the sweep of 2026-11-28")).sum() == 7  # every H200 row


def test_a_row_that_carries_the_chapters_hash_is_current_while_the_chapter_is_unchanged(results_repo):
    # A sweep cut off mid-chapter leaves its record at the last passed run (an older hash), but the rows it did
    # measure say which source they measured: those stay current, the others go by the record, and a row of an
    # older source is stale whatever the record says.
    from labmagic.store.fingerprint import chapter_hash

    now = chapter_hash(results_repo / "book" / "01_vector_add.ipynb")
    manifest = results_repo / "results" / "nvidia-h200" / "notebooks" / "01_vector_add.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"status": "passed", "input_hash": "an-older-one",
                                    "started": "2026-11-28T09:00:00+00:00"}))
    rows = _rows(H200, 4.8e12, "beef")
    for row in rows:
        if row["variant"] == "cuda_float4":
            row["chapter_hash"] = now
        elif row["variant"] == "cuda_naive":
            row["chapter_hash"] = "0123456789abcdef"
    write_rows(bench_csv_path("01_vector_add", "nvidia-h200"), rows)
    df = catalog.load(results_repo)
    reasons = staleness.stale_reasons(df, results_repo)
    h200 = df["gpu_slug"] == "nvidia-h200"
    by_variant = {v: set(reasons[h200 & (df["variant"] == v)]) for v in ("cuda_float4", "cuda_naive", "torch")}
    assert by_variant["cuda_float4"] == {""}
    assert by_variant["cuda_naive"] == {"chapter changed since this row was measured (2026-11-28)"}
    assert by_variant["torch"] == {"chapter changed since the sweep of 2026-11-28"}  # no hash: the record decides
    manifest.write_text(json.dumps({"status": "passed", "input_hash": now, "started": "2026-11-28T09:00:00+00:00"}))
    reasons = staleness.stale_reasons(catalog.load(results_repo), results_repo)
    assert set(reasons[h200 & (df["variant"] == "cuda_naive")]) == {
        "chapter changed since this row was measured (2026-11-28)"}  # the row's own hash outranks a fresh record


def test_a_run_of_a_source_since_put_back_does_not_make_the_current_rows_stale(results_repo):
    # The H200's rows measured the chapter as it is now; a later run on the A100 measured an edited cuda_naive, and
    # the edit was then reverted. That run's rows are stale (their chapter hash is not today's), and a stale row's
    # source is not the current one: the H200's cuda_naive stays current.
    from labmagic.store.fingerprint import chapter_hash

    now = chapter_hash(results_repo / "book" / "01_vector_add.ipynb")
    later = dict(A100, timestamp="2026-12-01T10:00:00+00:00")
    rows = _rows(later, 2.0e12, "c0de")
    for row in rows:
        row["chapter_hash"] = "an-edit-since-reverted"
    write_rows(bench_csv_path("01_vector_add", "nvidia-a100-sxm4-80gb"), rows)
    df = catalog.load(results_repo)
    reasons = staleness.stale_reasons(df, results_repo)
    a100 = df["gpu_slug"] == "nvidia-a100-sxm4-80gb"
    assert set(reasons[a100]) == {"chapter changed since this row was measured (2026-12-01)"}
    assert set(reasons[~a100]) == {""}, reasons[~a100]
    rows = _rows(later, 2.0e12, "c0de")  # the same run, had the chapter been left as it measured it
    for row in rows:
        row["chapter_hash"] = now
    write_rows(bench_csv_path("01_vector_add", "nvidia-a100-sxm4-80gb"), rows)
    df = catalog.load(results_repo)
    reasons = staleness.stale_reasons(df, results_repo)
    stale = df[reasons != ""]
    assert set(zip(stale["gpu_slug"], stale["variant"], strict=True)) == {("nvidia-h200", "cuda_naive")}


def test_results_page_has_a_table_per_gpu_with_provenance(results_repo, tmp_path):
    site = build_site(results_repo, tmp_path / "out")
    page = (site / "book" / "results.html").read_text(encoding="utf-8")
    text = page_text(site / "book" / "results.html")
    for slug in ("nvidia-h200", "nvidia-a100-sxm4-80gb"):
        start = page.index(f"lab-gpu-{slug}")
        assert "<table" in page[start:start + 20000]
    assert "driver 580.95.05" in text and "driver 570.86.15" in text and "commit 0123456789" in text
    assert "2 of 7 rows are stale" in text  # the A100's cuda_naive, on the page
    assert "OOM" in text and "93.0%" in text
    assert "Across GPUs" in text
    images = list((site / "_images").glob("01_vector_add*.png"))
    assert images and images[0].stat().st_size > 0


def test_readme_tables_are_generated_from_the_data(results_repo):
    """The headline names each GPU's best kernel of the book's own (cuda_float4, not torch, the library it races)
    and its share of that GPU's measured copy; the chapter table names every chapter in book/."""
    (results_repo / "results" / "nvidia-h200" / "ceilings.json").write_text(
        json.dumps({"copy_gbps": 4000.0, "matmul_tflops": {}}))
    table = results_pages.headline_markdown(results_repo)
    lines = [line for line in table.splitlines() if "01_vector_add" in line]
    assert len(lines) == 2 and "nvidia-h200" in lines[0]  # one per GPU, the book's first
    assert lines[0].startswith("| `01_vector_add` | `cuda_float4` | 4,464\u00a0GB/s | 112% of copy, 2^28 fp32 |")
    assert "no measured copy on nvidia-a100-sxm4-80gb" in lines[1]
    assert not table.rstrip().endswith("|  |") and "| |" not in table  # no empty trailing column
    teaches = chapters.chapters_markdown(results_repo)
    assert [line.split("|")[1].strip() for line in teaches.splitlines()[2:]] == [f"`{c.stem}`" for c in CHAPTERS]
    readme = results_repo / "README.md"
    readme.write_text(f"# t\n\n{chapters.CHAPTERS_BEGIN}\nold\n{chapters.CHAPTERS_END}\n\n"
                      f"{chapters.HEADLINE_BEGIN}\nold\n{chapters.HEADLINE_END}\n")
    assert run_command(results_cli, ["--check-readme"]) == 1
    assert run_command(results_cli, ["--readme"]) == 0
    assert table in readme.read_text() and teaches in readme.read_text() and "old" not in readme.read_text()
    assert run_command(results_cli, ["--check-readme"]) == 0
    readme.write_text(f"# t\n\n{chapters.HEADLINE_BEGIN}\n{chapters.HEADLINE_END}\n")
    with pytest.raises(LabError, match="no generated block <!-- results:chapters:begin"):
        run_command(results_cli, ["--check-readme"])


def test_the_repository_readme_matches_its_results(monkeypatch):
    monkeypatch.setenv("LABMAGIC_ROOT", str(ROOT))
    assert run_command(results_cli, ["--check-readme"]) == 0, "run `labmagic results --readme`"


def test_no_results_yet_still_builds_a_results_page(tmp_path):
    root = scratch_checkout(tmp_path / "repo")
    assert "No results yet" in results_pages.render(root)


def _headline_of(chapter, rows):
    import pandas as pd

    frame = pd.DataFrame([{"chapter": chapter, "gpu_slug": "nvidia-h200", "status": "ok", "below_floor": False,
                           "flops": 1e12, "nbytes": 1e9, "stale": "", **row} for row in rows])
    return chapters.headline(chapter, "nvidia-h200", frame, None)


def test_attention_is_headlined_against_cudnn_with_a_kernel_of_the_same_kind():
    """07's rule: the best non-causal kernel of the book at 4x16x4096x4096x128 bf16 against SDPA's cuDNN backend;
    not a causal kernel (it does half the work), not a library backend, not the race's own reference."""
    shape = "4x16x4096x4096x128"
    rows = [dict(variant=v, backend=b, shape=shape, dtype="bfloat16", ms_median=ms, tflops=1e12 / ms / 1e9,
                 vs_ref=50.0 / ms) for v, b, ms in (
        ("torch_naive", "torch", 50.0), ("sdpa_cudnn", "sdpa", 1.0), ("sdpa_flash", "sdpa", 1.7),
        ("cuda_wgmma_pingpong", "cuda", 1.03), ("cuda_wgmma_pingpong_causal", "cuda", 0.6),
        ("triton_flash", "triton", 1.4))]
    rows.append(dict(rows[3], shape="1x16x16384x16384x128", ms_median=0.1))  # another shape: not the headline's
    got = _headline_of("07_attention", rows)
    assert (got.kernel, got.versus) == ("cuda_wgmma_pingpong", "0.97x cuDNN, 4x4096 d128")
    assert got.figure == "971\u00a0TFLOP/s"


def test_a_kernel_race_headline_names_the_fastest_peer_of_the_same_kind_at_the_same_shape():
    """07 races FA3 and FlashInfer: the row adds the best kernel against the fastest peer at the headline's shape and
    dtype (the peer's median over ours, as the reference ratio), a causal peer excluded as a causal kernel is, and a
    faster peer at another shape ignored; the capstone's FlashInfer row (its model with a peer inside) is not one."""
    shape = "4x16x4096x4096x128"
    rows = [dict(variant=v, backend=b, shape=shape, dtype="bfloat16", ms_median=ms, tflops=1e12 / ms / 1e9,
                 vs_ref=50.0 / ms) for v, b, ms in (
        ("torch_naive", "torch", 50.0), ("sdpa_cudnn", "sdpa", 1.0), ("cuda_wgmma_ws", "cuda", 1.03),
        ("flashinfer_prefill", "flashinfer", 0.98), ("fa3_flash", "fa3", 0.88), ("fa3_flash_causal", "fa3", 0.4))]
    rows.append(dict(rows[4], shape="1x16x16384x16384x128", ms_median=0.1))
    got = _headline_of("07_attention", rows)
    assert got.versus == "0.97x cuDNN, 4x4096 d128; 0.85x FA3 (the fastest peer)"
    without = _headline_of("07_attention", [r for r in rows if r["backend"] not in ("fa3", "flashinfer")])
    assert without.versus == "0.97x cuDNN, 4x4096 d128"
    decode = [dict(variant=v, backend=b, shape="1x4096", dtype="bfloat16", ms_median=ms, gbps=1.0, tflops=1.0,
                   vs_ref=16.0 / ms) for v, b, ms in (("torch_hf_sdpa", "torch", 16.0), ("ours_graphed", "cuda", 4.8),
                                                       ("ours_flashinfer_graphed", "flashinfer", 4.0))]
    assert "peer" not in _headline_of("09_llama", decode).versus


def test_a_chapter_without_a_rule_takes_its_largest_problem_and_the_race_reference():
    """Of the largest size, the squarest shape, in the first dtype; against the race's own reference (the variant
    whose every vs_ref is 1); a library variant is never the best kernel, however fast."""
    rows = []
    for dtype, scale in (("float32", 1.0), ("bfloat16", 0.5)):
        for shape, ms in (("8192x2048", 1.0), ("4096x4096", 2.0), ("2048x8192", 3.0), ("16x16", 0.001)):
            for variant, backend, factor in (("naive", "cuda", 1.5), ("ours", "cuda", 1.0), ("torch", "torch", 0.5)):
                rows.append(dict(variant=variant, backend=backend, dtype=dtype, shape=shape,
                                 ms_median=ms * scale * factor, gbps=1.0, tflops=1.0, vs_ref=1.5 / factor))
    got = _headline_of("09_new_chapter", rows)
    assert (got.kernel, got.versus) == ("ours", "1.50x naive, 4096x4096 bfloat16")


# ------------------------------------------------------------------------------------------- Across GPUs, provenance

HEADER = re.compile(r"(?P<slug>[a-z0-9-]+) (?P<dtype>\S+) \((?P<shape>[^)]+)\)")


def _across_gpus(page: str, chapter: str) -> dict[tuple[str, str, str], dict[str, str]]:
    """The chapter's Across-GPUs table: (slug, dtype, shape) of each column -> {variant: cell}."""
    section = page[page.index(f"\n## {chapter}\n") + 1:]
    section = section[section.index("### Across GPUs"):].split("\n## ")[0]  # up to the next chapter
    lines = [line for line in section.splitlines() if line.startswith("|") and not line.startswith("|---")]
    head, *body = [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines]
    assert head[0] == "variant"
    columns = {}
    for i, label in enumerate(head[1:], 1):
        match = HEADER.fullmatch(label)
        assert match, f"column {label!r} does not name GPU, dtype and shape"
        columns[(match["slug"], match["dtype"], match["shape"])] = {row[0]: row[i] for row in body}
    return columns


def _pct(cell: str) -> float:
    assert cell.endswith("%"), cell
    return float(cell[:-1].replace(",", ""))


@pytest.mark.parametrize("chapter", ["03_online_softmax", "04_rmsnorm", "05_fused_softmax_rmsnorm"])
def test_across_gpus_cells_are_the_csv_rows_at_the_labelled_shape_and_dtype(chapter):
    """Read-only, from the repository's own CSVs: the H200 raced 2^28 elements in nine row lengths and two dtypes;
    each column is one dtype at the squarest shape, and every cell is that row's sol_pct (its status where not ok)."""
    page = results_pages.render(ROOT)
    csv = ROOT / "results" / "nvidia-h200" / "bench" / f"{chapter}.csv"
    rows = catalog.read_bench_csv(csv, ROOT)
    columns = _across_gpus(page, chapter)
    assert sorted(columns) == [("nvidia-h200", "bfloat16", "16384x16384"), ("nvidia-h200", "float32", "16384x16384")]
    for (_, dtype, shape), cells in columns.items():
        at = rows[(rows["dtype"] == dtype) & (rows["shape"] == shape)]
        assert set(cells) == set(at["variant"])
        for _, row in at.iterrows():
            if row["status"] != "ok":  # a peer that failed its check there (05's quack in bf16) shows its status
                assert cells[row["variant"]] == row["status"], (dtype, row["variant"])
                continue
            assert _pct(cells[row["variant"]]) == pytest.approx(row["sol_pct"], rel=5e-3), (dtype, row["variant"])


def _row(variant, shape, dtype, sol_pct, status="ok", **provenance):
    return dict(chapter="03_online_softmax", variant=variant, backend="cuda", shape=shape, dtype=dtype, status=status,
                ms_median="" if status != "ok" else 1.0, sol_pct="" if status != "ok" else sol_pct,
                source_hash="f00d", **{**H200, **provenance})


def test_across_gpus_has_a_column_per_gpu_and_dtype_at_its_own_shape(tmp_path):
    """Each (GPU, dtype) shows its largest problem; of equal sizes the squarest; of equally square, the first
    sorted; a variant that failed there shows its status, one not measured there a dash. Each value is distinct, so a cell from another row
    shows."""
    root = tmp_path / "repo"
    (root / "book").mkdir(parents=True)
    h200 = [
        *(_row(v, s, "float32", p) for v, s, p in (
            ("torch", "1024x16384", 11.0), ("torch", "4096x4096", 12.0), ("torch", "16384x1024", 13.0),
            ("torch", "64x64", 14.0), ("ours", "1024x16384", 21.0), ("ours", "4096x4096", 22.0),
            ("ours", "16384x1024", 23.0))),
        _row("pallas", "4096x4096", "float32", 0, status="oom"),
        *(_row(v, s, "bfloat16", p) for v, s, p in (
            ("torch", "2048x2048", 31.0), ("torch", "1024x1024", 32.0), ("ours", "2048x2048", 41.0))),
        _row("ours", "4096x4096", "bfloat16", 0, status="error"),  # larger, but never passed: not the column's shape
    ]
    a100 = [_row(v, s, "float32", p, gpu="NVIDIA A100-SXM4-80GB") for v, s, p in (
        ("torch", "8192x2048", 51.0), ("torch", "2048x8192", 52.0), ("ours", "8192x2048", 61.0),
        ("ours", "2048x8192", 62.0), ("ours", "128x128", 63.0))]
    write_rows(root / "results" / "nvidia-h200" / "bench" / "03_online_softmax.csv", h200)
    write_rows(root / "results" / "nvidia-a100" / "bench" / "03_online_softmax.csv", a100)
    columns = _across_gpus(results_pages.render(root), "03_online_softmax")
    assert columns == {
        ("nvidia-a100", "float32", "2048x8192"): {"torch": "52.0%", "ours": "62.0%", "pallas": "-"},
        ("nvidia-h200", "bfloat16", "2048x2048"): {"torch": "31.0%", "ours": "41.0%", "pallas": "-"},
        ("nvidia-h200", "float32", "4096x4096"): {"torch": "12.0%", "ours": "22.0%", "pallas": "OOM"},
    }


def test_a_commit_the_writer_could_not_read_is_said_so(tmp_path):
    """``-`` is what provenance.collect writes without git: said once when no row has a commit; when some do,
    those are listed and the rest counted; a ``-dirty`` mark survives the shortening."""
    import pandas as pd

    rows = [_row("torch", "64x64", "float32", 1.0, git_commit="-", jax="-") for _ in range(3)]
    line = results_pages.provenance(pd.DataFrame(rows))
    assert "**commit** not recorded (the run had no git checkout)" in line
    assert "**jax** not installed" in line and "**torch** 2.13.0" in line
    rows[0]["git_commit"] = "0123456789ab-dirty"
    line = results_pages.provenance(pd.DataFrame(rows))
    assert "**commit** 0123456789-dirty; 2 of 3 rows: not recorded (the run had no git checkout) ·" in line


def test_the_results_page_names_each_chapters_commit_and_says_when_none_was_recorded(tmp_path):
    """Each chapter's section names the commit its CSV recorded; a CSV holding ``-`` (a run without a git checkout,
    as chapter 01's rows once were) says so instead of showing the dash."""
    shutil.copytree(ROOT / "results" / "nvidia-h200" / "bench", tmp_path / "results" / "nvidia-h200" / "bench")
    page = results_pages.render(ROOT)
    for chapter, following in (("01_vector_add", "02_sgemm"), ("02_sgemm", "03_online_softmax")):
        commit = catalog.read_bench_csv(ROOT / "results" / "nvidia-h200" / "bench" / f"{chapter}.csv",
                                        ROOT)["git_commit"].iloc[0]
        section = page[page.index(f"\n## {chapter}\n"):page.index(f"\n## {following}\n")]
        assert commit != "-" and f"**commit** {commit[:10]} ·" in section
    csv_path = tmp_path / "results" / "nvidia-h200" / "bench" / "01_vector_add.csv"
    frame = catalog.read_bench_csv(csv_path, tmp_path)
    text = csv_path.read_text(encoding="utf-8").replace(f",{frame['git_commit'].iloc[0]},", ",-,")
    csv_path.write_text(text, encoding="utf-8")
    assert set(catalog.read_bench_csv(csv_path, tmp_path)["git_commit"]) == {"-"}
    page = results_pages.render(tmp_path)
    section = page[page.index("\n## 01_vector_add\n"):page.index("\n## 02_sgemm\n")]
    assert "**commit** not recorded (the run had no git checkout)" in section and "**commit** -" not in section


def test_plots_are_redrawn_from_the_csvs(results_repo):
    png = bench_csv_path("01_vector_add", "nvidia-h200").with_suffix(".png")
    before = png.read_bytes()
    assert run_command(results_cli, ["--plots", "--root", str(results_repo)]) == 0
    after = png.read_bytes()
    assert after != before and after[:8] == b"\x89PNG\r\n\x1a\n"
    width = int.from_bytes(after[16:20], "big")  # the IHDR chunk: the figure the book shows, not the 3x2 stand-in
    assert 500 < width <= 1000
    assert bench_csv_path("01_vector_add", "nvidia-a100-sxm4-80gb").with_suffix(".png").is_file()


def test_the_gpu_table_shows_one_eager_calls_host_time_and_marks_host_bound_rows(tmp_path):
    """Chapter 08's case: a kernel faster on the device than cuBLAS whose eager call spends far longer on the host."""
    root = scratch_checkout(tmp_path / "repo")
    base = dict(chapter="08_int8", backend="triton", shape="16x14336x4096", dtype="int8", status="ok", **H200)
    write_rows(root / "results" / "nvidia-h200" / "bench" / "08_int8.csv", [
        dict(base, variant="triton_w8a8", ms_median=0.0235, host_ms=0.0815, isolated_ms=0.101),
        dict(base, variant="torch_bf16", backend="torch", ms_median=0.0333, host_ms=0.0152, isolated_ms=0.0485),
        dict(base, variant="cuda_old", backend="cuda", ms_median=0.04),  # measured before the host columns
    ])
    page = results_pages.gpu_table(catalog.load(root))
    short, full = page.split(":::{dropdown", 1)
    assert "| triton_w8a8 | 0.02350 |" in short and "host-bound" in short  # the mark fits the short table
    head, _, *lines = [line for line in full.splitlines() if line.startswith("|")]  # the host columns, the full one
    cells = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[1:-1]] for line in lines}
    columns = [c.strip() for c in head.split("|")[1:-1]]
    host, notes = columns.index("host ms (isolated)"), columns.index("notes")
    assert cells["triton_w8a8"][host] == "0.0815 (0.101)" and cells["triton_w8a8"][notes] == "host-bound"
    assert cells["torch_bf16"][host] == "0.0152 (0.0485)" and cells["torch_bf16"][notes] == ""
    assert cells["cuda_old"][host] == "-" and cells["cuda_old"][notes] == ""


def _gemm_row(variant, tflops, below_floor, **extra):
    n = 8192
    flops, ms = 2 * n**3, 2 * n**3 / (tflops * 1e12) * 1e3
    return dict(chapter="06_tensor_core_gemm", variant=variant, backend="cuda", shape=f"{n}x{n}x{n}", dtype="bfloat16",
                status="ok", flops=flops, nbytes=6 * n * n, ms_median=ms, tflops=tflops, below_floor=below_floor,
                source_hash="f00d", **{**H200, **extra})


def test_the_floor_flag_is_judged_again_against_the_spec_sheet_when_read(tmp_path):
    """A CSV's own ``below_floor`` is not trusted: rows that an earlier labmagic flagged for beating cuBLAS (72-73% of
    the H200's bf16 peak) show no suspect mark, and the row that passes the spec sheet is flagged though its CSV
    says it is not; the headline does not pick a row below the floor."""
    root = scratch_checkout(tmp_path / "repo")
    write_rows(root / "results" / "nvidia-h200" / "bench" / "06_tensor_core_gemm.csv", [
        _gemm_row("torch", 694.8, False), _gemm_row("gluon", 726.0, True), _gemm_row("broken_timer", 1190.0, False)])
    df = results_pages.catalog(root)
    assert dict(zip(df["variant"], df["below_floor"], strict=True)) == {
        "torch": False, "gluon": False, "broken_timer": True}
    table = results_pages.gpu_table(df)
    flagged = [line for line in table.splitlines() if "suspect" in line]
    assert flagged and all("broken_timer" in line for line in flagged)  # the short table, and the full one
    assert "broken_timer" not in results_pages.headline_markdown(root)


def test_the_committed_gemm_rows_ahead_of_cublas_are_not_suspect():
    """Chapter 06's kernels ahead of cuBLAS at 8192^3 are not below the spec sheet's floor: the sweep of 5b19d02
    stored ``below_floor=False`` for them (an earlier rule stored True), and the Results page, which judges every
    row again, calls none of them suspect."""
    csv = ROOT / "results" / "nvidia-h200" / "bench" / "06_tensor_core_gemm.csv"
    stored = catalog.read_bench_csv(csv, ROOT)
    ahead = stored[(stored["shape"] == "8192x8192x8192") & (stored["vs_ref"].astype(float) > 1.0)]
    assert len(ahead), "the committed CSV no longer holds a row ahead of cuBLAS at 8192^3 to judge"
    assert (ahead["below_floor"] != "True").all()
    page = results_pages.render(ROOT)
    section = page[page.index("\n## 06_tensor_core_gemm\n"):page.index("\n## 07_attention\n")]
    assert "suspect" not in section


def test_the_capstone_is_headlined_by_its_own_graphed_decode_step_not_a_peer_w8a8_or_prefill_row():
    """09's rule: the decode step at batch 1, 4k, bf16, against transformers eager. A faster row at that shape that is
    not the book's bf16 decode step (FlashInfer's attention in it, a peer; the W8A8 model; a prefill of 4096 tokens,
    whose shape key is the same) is never its headline."""
    rows = [dict(variant=v, backend=b, shape="1x4096", dtype="bfloat16", ms_median=ms, gbps=15.5 / ms * 1e3,
                 tflops=1.0, vs_ref=16.0 / ms) for v, b, ms in (
        ("torch_hf_sdpa", "torch", 16.0), ("ours_eager", "cuda", 5.2), ("ours_graphed", "cuda", 4.8),
        ("ours_flashinfer_graphed", "flashinfer", 4.0), ("ours_w8a8_graphed", "triton", 3.8),
        ("ours_prefill", "cuda", 100.0))]
    got = _headline_of("09_llama", rows)
    assert (got.kernel, got.versus) == ("ours_graphed",
                                        "3.33x transformers eager, decode step, batch 1, 4k context, bf16")
