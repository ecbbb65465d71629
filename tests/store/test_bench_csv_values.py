"""Bench CSVs are read with the writers' rule (:func:`labmagic.store.schema.row_problem`): a time on an ``ok`` row
that is not a positive, finite number of milliseconds up to a day, a name that is not a variant name (a right-to-left
override, 10,000 characters), text with a bidirectional control, is one line naming the file and line, from every
mode of ``labmagic results`` and from the Results page's build step; the page never gets the row. The writer refuses
the same rows, so a sweep cannot write what the book would refuse."""

from __future__ import annotations

import csv
import io
import subprocess

import pytest

from labmagic import cli
from labmagic.display import chapters, results_page
from labmagic.errors import LabError
from labmagic.store import catalog
from labmagic.store.bench_csv import write_rows
from labmagic.store.schema import COLUMNS, MAX_MS

CSV = "results/nvidia-h200/bench/01_vector_add.csv"
RLO = "\u202e"


def _row(variant: str, **cells) -> dict:
    return dict(chapter="01_vector_add", variant=variant, backend="cuda", shape="4096", dtype="float32", status="ok",
                ms_median=1.0, ms_min=0.9, ms_max=1.2, gbps=12.0, sol_pct=50.0, gpu="NVIDIA H200",
                timestamp="2026-11-29T10:00:00+00:00") | cells


#: (the bad line's cells, what the one-line error says about them)
BAD = {
    "inf": (_row("cuda_x", ms_median="inf"), "ms_median is 'inf' on an ok row: a time is more than 0 and at most "
                                             "86400000 ms (a day)"),
    "nan": (_row("cuda_x", ms_median="nan"), "ms_median is 'nan' on an ok row"),
    "negative": (_row("cuda_x", ms_median="-1"), "ms_median is '-1' on an ok row"),
    "zero": (_row("cuda_x", ms_min="0"), "ms_min is '0' on an ok row"),
    "1e308": (_row("cuda_x", ms_median="1e308"), "ms_median is '1e308' on an ok row"),
    "throughput inf": (_row("cuda_x", gbps="inf"), "gbps is 'inf', not a finite number"),
    "right-to-left override": (_row(f"cuda_{RLO}4taolf"), "variant 'cuda_\\u202e4taolf' is not a variant name"),
    "10,000-character name": (_row("v" * 10_000), f"variant {'v' * 40!r}... (10000 characters) is not a variant "
                                                  "name"),
    "override in text": (_row("cuda_x", gpu=f"NVIDIA {RLO}H200"), "gpu 'NVIDIA \\u202eH200' holds U+202E "
                                                                   "(RIGHT-TO-LEFT OVERRIDE)"),
    "status": (_row("cuda_x", status="OK"), "status 'OK' is not one of ok, mismatch, error"),
}


def _line(cells: dict) -> str:
    text = io.StringIO()
    csv.DictWriter(text, fieldnames=COLUMNS, restval="").writerow({k: str(v) for k, v in cells.items()})
    return text.getvalue()


def _results(root, bad: dict | None = None):
    """A good CSV of two rows (lines 2 and 3), ``bad`` written by hand as line 4 (no writer would write it)."""
    write_rows(root / CSV, [_row("torch"), _row("cuda_float4")])
    if bad is not None:
        with open(root / CSV, "a", newline="") as handle:
            handle.write(_line(bad))
    return root


def _one_line(capsys, argv: list[str]) -> str:
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert "\n" not in err and RLO not in err and RLO not in captured.out and len(err) < 400, err
    return err


@pytest.mark.parametrize("case", BAD.values(), ids=BAD.keys())
def test_labmagic_results_refuses_the_row_in_one_line_naming_file_and_line(tmp_path, capsys, case):
    cells, why = case
    err = _one_line(capsys, ["results", "--root", str(_results(tmp_path, cells))])
    assert err.startswith(f"LabError: {CSV}, line 4: {why}")


@pytest.mark.parametrize("case", BAD.values(), ids=BAD.keys())
def test_the_results_page_shows_the_error_in_place_of_the_tables(tmp_path, case):
    """What the Sphinx extension puts on the page (its build log gets the same line: see the site test)."""
    cells, why = case
    root = _results(tmp_path, cells)
    with pytest.raises(LabError, match=f"^{CSV}, line 4: "):
        results_page.render(root)
    _results_body = pytest.importorskip("labmagic.sphinx.fill_results")._results_body  # Sphinx: the book extra
    from sphinx.util.logging import skip_warningiserror

    with skip_warningiserror():  # outside a build: a strict build earlier in this process left its filter behind
        page = _results_body(root)
    assert f"The results could not be read: {CSV}, line 4: " in page and "cuda_float4" not in page
    assert RLO not in page and "v" * 41 not in page and "cuda_x" not in page  # the bad row is not on it


def _git(root, *args):
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


MODES = {"list": [], "stale": ["--stale"], "compare": ["--compare", "HEAD"], "plots": ["--plots"],
         "readme": ["--readme"], "check-readme": ["--check-readme"]}


@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
def test_every_mode_of_labmagic_results_refuses_it(tmp_path, capsys, mode):
    root = _results(tmp_path)
    readme = "# Kernel Lab\n\n" + chapters.HEADLINE_BEGIN + "\n" + chapters.HEADLINE_END + "\n"
    (root / "README.md").write_text(readme)
    _git(root, "init", "-q")
    _git(root, "add", "results")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "good rows")
    _results(root, BAD["inf"][0])
    err = _one_line(capsys, ["results", "--root", str(root), *mode])
    assert err.startswith(f"LabError: {CSV}, line 4: ms_median is 'inf' on an ok row")
    assert (root / "README.md").read_text() == readme and not list(root.glob("results/*/bench/*.png"))


@pytest.mark.parametrize("case", [v for k, v in BAD.items() if k != "override in text"],
                         ids=[k for k in BAD if k != "override in text"])
def test_the_writer_refuses_the_same_rows_and_keeps_the_csv(tmp_path, case):
    """(Free text it stores escaped: see below.)"""
    cells, why = case
    root = _results(tmp_path)
    before = (root / CSV).read_bytes()
    with pytest.raises(LabError) as err:
        write_rows(root / CSV, [cells])
    message = str(err.value)
    assert message.startswith(f"{root / CSV}: not writing a row that no reader would accept: ")
    assert why.replace(RLO, "\\u202e") in message and RLO not in message
    assert (root / CSV).read_bytes() == before


def test_the_rows_writers_write_are_read(tmp_path):
    """The bounds leave every real value alone: a day's time, a mismatch whose output held NaN/inf (its relative
    error is inf), a skipped row without times, a multi-line error message, a 128-character name."""
    rows = [_row("a" * 128, ms_median=MAX_MS, ms_max=MAX_MS), _row("torch", ms_median=0.00394),
            _row("cuda_wrong", status="mismatch", ms_median="", err_over_tol=float("inf"), error="3 of 4 outputs\nNaN"),
            _row("pallas", status="skipped", ms_median="", ms_min="", ms_max="", error="above limit 68719476736")]
    write_rows(tmp_path / CSV, rows)
    df = catalog.load(tmp_path)
    assert len(df) == 4 and df["err_over_tol"].max() == float("inf")
    assert "a" * 128 in results_page.render(tmp_path)


def test_a_writer_stores_control_characters_of_free_text_as_escapes(tmp_path):
    """An exception's message or a GPU's name is text a writer does not choose: stored escaped and cut, never
    refused."""
    write_rows(tmp_path / CSV, [_row("cuda_x", status="error", ms_median="", gpu=BAD["override in text"][0]["gpu"],
                                     error=f"bad\x1b[31m {RLO}x" + "y" * 5000)])
    row = catalog.load(tmp_path).iloc[0]
    assert row["error"].startswith("bad\\x1b[31m \\u202ex") and len(row["error"]) == 2000
    assert row["gpu"] == "NVIDIA \\u202eH200"
