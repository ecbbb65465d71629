"""``labmagic results --bars``: after a chapter's rows land, each exercise statement's bar sentence is rewritten from
them, as the judge computes it, on a copy of the repository's exercise notebooks and H200 rows."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from labmagic.cli import main
from labmagic.errors import LabError
from labmagic.exercises import bars, registry

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """book/exercises and results/nvidia-h200 (ceilings, bench CSVs) copied into a root of their own."""
    shutil.copytree(ROOT / "book" / "exercises", tmp_path / "book" / "exercises")
    h200 = tmp_path / "results" / "nvidia-h200"
    shutil.copytree(ROOT / "results" / "nvidia-h200" / "bench", h200 / "bench", ignore=shutil.ignore_patterns("*.png"))
    shutil.copy(ROOT / "results" / "nvidia-h200" / "ceilings.json", h200)
    monkeypatch.setenv("LABMAGIC_ROOT", str(tmp_path))
    return tmp_path


def _set_median(path: Path, variant: str, shape: str, ms: str) -> None:
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        fields, rows = reader.fieldnames, list(reader)
    for row in rows:
        if row["variant"] == variant and row["shape"] == shape and row["status"] == "ok":
            row["ms_median"] = ms
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def test_bars_follow_new_rows_and_touch_only_their_notebook(checkout, capsys):
    exercise = registry.find("rmsnorm_rows")
    old = bars.bar_value(exercise, "nvidia-h200").text
    _set_median(checkout / "results" / "nvidia-h200" / "bench" / "04_rmsnorm.csv", "triton", "65536x4096", "0.6")
    others = {p: p.read_bytes() for p in (checkout / "book" / "exercises").glob("*.ipynb") if p.stem != "04_rmsnorm"}
    assert main(["results", "--bars"]) == 0
    assert "1 exercise notebook(s) changed" in capsys.readouterr().out
    text = (checkout / "book" / "exercises" / "04_rmsnorm.ipynb").read_text(encoding="utf-8")
    new = bars.bar_value(exercise, "nvidia-h200").text
    assert new != old and "0.7059 ms or less" in new and "(0.6 ms on the NVIDIA H200)" in new
    assert json.dumps(new)[1:-1] in text and json.dumps(old)[1:-1] not in text
    assert all(p.read_bytes() == data for p, data in others.items())
    assert main(["results", "--bars"]) == 0  # a second run finds nothing to change
    assert "0 exercise notebook(s) changed" in capsys.readouterr().out


def test_a_statement_without_its_bar_sentence_is_one_clear_error(checkout):
    path = checkout / "book" / "exercises" / "04_rmsnorm.ipynb"
    path.write_text(path.read_text(encoding="utf-8").replace("**Bar:** at 262144x1024", "Bar at 262144x1024"),
                    encoding="utf-8")
    with pytest.raises(LabError, match="rmsnorm_warp must have one '\\*\\*Bar:\\*\\* at ...' sentence, found 0"):
        bars.restate_statements()
