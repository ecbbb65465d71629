"""A results/ file that is not what the writers produce (a malformed line, a foreign header, a truncated chapter
notebook, a broken sweep record) stops the Results page and ``labmagic results`` with one line naming the file (and
the line), instead of silently dropping a chapter or ending in a traceback."""

from __future__ import annotations

import json

import pytest
from sitebuild import scratch_checkout

from labmagic import cli
from labmagic.cli import book
from labmagic.display import results_page
from labmagic.errors import LabError
from labmagic.store import catalog
from labmagic.store.bench_csv import write_rows
from labmagic.store.schema import COLUMNS

CSV = "results/nvidia-h200/bench/01_vector_add.csv"


def _row(variant: str) -> dict:
    return dict(chapter="01_vector_add", variant=variant, backend="cuda", shape="4096", dtype="float32", status="ok",
                ms_median=1.0, gpu="NVIDIA H200", timestamp="2026-11-29T10:00:00+00:00")


def _results(root, *extra_lines: str, header: list[str] = COLUMNS):
    """A good CSV of two rows (lines 2 and 3), its header replaced by ``header``, then ``extra_lines``."""
    path = root / CSV
    write_rows(path, [_row("torch"), _row("cuda_float4")])
    lines = path.read_text().splitlines()
    path.write_text("\n".join([",".join(header), *lines[1:], *extra_lines]) + "\n")
    return root


def _line(*cells: str) -> str:
    return ",".join([*cells, *[""] * (len(COLUMNS) - len(cells))])


MALFORMED = {
    "unbalanced quote": ('01_vector_add,"cuda_naive,cuda,4096,float32,ok', 4, "not a CSV row"),
    "text after a closing quote": (_line("01_vector_add", '"cuda"x', "cuda"), 4, "not a CSV row"),
    "extra fields": (_line("01_vector_add", "cuda_naive") + ",surplus", 4, f"{len(COLUMNS) + 1} fields"),
    "missing fields": ("01_vector_add,cuda_naive,cuda,4096,float32,ok", 4, "6 fields"),
    "not a number": (_line("01_vector_add", "cuda_naive", "cuda", "4096", "float32", "ok", "", "", "fast"), 4,
                     "ms_median is 'fast', not a number"),
}


@pytest.mark.parametrize("case", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_line_is_refused_naming_file_and_line(tmp_path, case):
    line, number, why = case
    root = _results(tmp_path, line)
    with pytest.raises(LabError) as err:
        catalog.load(root)
    message = str(err.value)
    assert message.startswith(f"{CSV}, line {number}: ") and why in message and "\n" not in message
    with pytest.raises(LabError, match=f"line {number}"):
        results_page.render(root)
    with pytest.raises(LabError, match=f"line {number}"):
        results_page.headline_markdown(root)


def test_a_bad_line_after_a_multi_line_field_is_counted_by_lines(tmp_path):
    """A quoted error message may span lines (the writer quotes it): line numbers are the file's, not rows'."""
    cells = _line("01_vector_add", "cuda_naive", "cuda", "4096", "float32", "error").split(",")
    cells[COLUMNS.index("error")] = '"two\nlines"'
    multi = ",".join(cells)
    root = _results(tmp_path, multi, "01_vector_add,short")
    assert len(catalog.load(_results(tmp_path / "good", multi))) == 3
    with pytest.raises(LabError, match=f"{CSV}, line 6: 2 fields"):
        catalog.load(root)


@pytest.mark.parametrize("header", [["chapter", "variant", "ms"], COLUMNS[:-1] + ["when"], COLUMNS[::-1], []],
                         ids=["foreign", "renamed", "reordered", "empty"])
def test_a_csv_whose_header_is_not_the_schema_is_refused(tmp_path, header):
    root = _results(tmp_path, header=header)
    if not header:
        (root / CSV).write_text("")
    with pytest.raises(LabError, match=rf"^{CSV}: (the header is not labmagic.store.schema.COLUMNS|empty)"):
        catalog.load(root)


def test_a_header_only_csv_is_no_rows(tmp_path):
    (tmp_path / CSV).parent.mkdir(parents=True)
    (tmp_path / CSV).write_text(",".join(COLUMNS) + "\n")
    assert catalog.load(tmp_path).empty


def test_labmagic_results_fails_with_one_line_naming_file_and_line(tmp_path, capsys):
    root = _results(tmp_path, MALFORMED["extra fields"][0])
    assert cli.main(["results", "--root", str(root)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"LabError: {CSV}, line 4: {len(COLUMNS) + 1} fields where the header has {len(COLUMNS)}"
    assert cli.main(["results", "--root", str(root), "--stale"]) == 2


def _truncated_chapter(tmp_path):
    root = scratch_checkout(tmp_path / "repo")
    write_rows(root / CSV, [_row("torch")])
    notebook = root / "book" / "01_vector_add.ipynb"
    notebook.write_text(notebook.read_text(encoding="utf-8")[:2000], encoding="utf-8")
    return root, notebook


def test_a_truncated_chapter_notebook_is_one_line_from_labmagic_results(tmp_path, capsys):
    root, notebook = _truncated_chapter(tmp_path)
    assert cli.main(["results", "--root", str(root)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"LabError: {notebook}: not a notebook: invalid JSON at line ") and "\n" not in err


def test_a_truncated_chapter_notebook_is_one_line_from_labmagic_book(tmp_path):
    """Checked before jupyter-book starts: myst-nb would stop on it with a traceback."""
    root, notebook = _truncated_chapter(tmp_path)
    with pytest.raises(LabError, match=f"^{notebook}: not a notebook: invalid JSON") as err:
        book.build(root, tmp_path / "out", quiet=True)
    assert "\n" not in str(err.value) and not (tmp_path / "out").exists()


@pytest.mark.parametrize("record", ["{", "[1, 2]", '"passed"'], ids=["truncated", "a list", "a string"])
def test_a_broken_sweep_record_is_refused_naming_it(tmp_path, record):
    """A record that cannot be read must not quietly make every row look fresh; the message names it under the
    checkout (it is published on the Results page in the table's place), not by this machine's path."""
    root = scratch_checkout(tmp_path / "repo")
    write_rows(root / CSV, [_row("torch")])
    path = root / "results" / "nvidia-h200" / "notebooks" / "01_vector_add.json"
    path.parent.mkdir(parents=True)
    path.write_text(record)
    with pytest.raises(LabError, match="^results/nvidia-h200/notebooks/01_vector_add.json: not a sweep record"):
        results_page.render(root)
    path.write_text(json.dumps({"status": "passed", "input_hash": "old", "started": "2026-11-01T00:00:00"}))
    assert "chapter changed since the sweep of 2026-11-01" in results_page.render(root)


@pytest.mark.parametrize("version", [0, 1, 2],
                         ids=["before the intervals", "before the host times", "before the chapter hash"])
def test_a_csv_an_earlier_labmagic_wrote_reads_with_its_missing_columns_empty(tmp_path, capsys, version):
    """Old sweeps (and old revisions, for --compare) still read: the columns they lack are empty, nothing invented;
    max_rel_err, which meant a relative error, is not read as err_over_tol. --upgrade rewrites them."""
    from labmagic.store.schema import EARLIER_COLUMNS

    old = EARLIER_COLUMNS[version]
    path = tmp_path / CSV
    path.parent.mkdir(parents=True)
    row = dict.fromkeys(old, "") | dict(chapter="01_vector_add", variant="torch", backend="torch", shape="4096",
                                        dtype="float32", status="ok", ms_median="0.5", ms_min="0.4", ms_max="0.9",
                                        max_rel_err="8350", timer="cuda_event")
    path.write_text(",".join(old) + "\n" + ",".join(row[c] for c in old) + "\n")
    for df in (catalog.load(tmp_path), None):
        if df is None:
            assert cli.main(["results", "--upgrade", "--root", str(tmp_path)]) == 0
            assert "01_vector_add.csv: upgraded" in capsys.readouterr().out
            assert path.read_text().splitlines()[0] == ",".join(COLUMNS)
            df = catalog.load(tmp_path)
        assert df["ms_median"].tolist() == [0.5] and df["ms_max"].tolist() == [0.9]
        assert df["timer"].tolist() == ["cuda_event"] and df["variant"].tolist() == ["torch"]
        assert df["host_ms"].isna().all() and df["isolated_ms"].isna().all() and df["err_over_tol"].isna().all()
        assert "max_rel_err" not in df.columns
    assert cli.main(["results", "--upgrade", "--root", str(tmp_path)]) == 0  # a current CSV is left alone
    assert "upgraded" not in capsys.readouterr().out
    path.write_text("chapter,variant,ms\n01_vector_add,torch,1\n")
    assert cli.main(["results", "--upgrade", "--root", str(tmp_path)]) != 0
    assert "neither labmagic.store.schema.COLUMNS nor an earlier one" in capsys.readouterr().err


def test_a_short_line_under_an_earlier_header_is_refused_naming_it(tmp_path):
    from labmagic.store.schema import EARLIER_COLUMNS

    old = EARLIER_COLUMNS[-1]
    path = tmp_path / CSV
    path.parent.mkdir(parents=True)
    path.write_text(",".join(old) + "\n" + ",".join(["01_vector_add", "torch"] + [""] * (len(old) - 3)) + "\n")
    with pytest.raises(LabError, match=rf"line 2: {len(old) - 1} fields where the header has {len(old)}"):
        catalog.load(tmp_path)
