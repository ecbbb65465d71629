"""results/<gpu>/exercises.csv: the columns declared once, rows replaced by key, read back with their types."""

from __future__ import annotations

import pytest

from labmagic.errors import LabError
from labmagic.store import exercise_csv
from labmagic.store.exercise_csv import ExerciseRow


def test_rows_are_replaced_by_key_and_read_back(tmp_path, monkeypatch):
    monkeypatch.setenv("LABMAGIC_ROOT", str(tmp_path))
    provenance = {"gpu": "NVIDIA H200", "git_commit": "abc1234", "timestamp": "2026-12-04T00:00:00+00:00"}
    first = [ExerciseRow("01_vector_add", "copy_float4", "cuda", "solution", "pass", 0.49, 0.556, 7, "correct"),
             ExerciseRow("01_vector_add", "scale_add", "triton", "solution", "fail", 1.2, 0.88, 8, "too slow")]
    path = exercise_csv.write_exercise_rows(first, provenance, "nvidia-h200")
    assert path == tmp_path / "results" / "nvidia-h200" / "exercises.csv"
    assert path.read_text().splitlines()[0] == ",".join(exercise_csv.COLUMNS)
    again = ExerciseRow("01_vector_add", "scale_add", "triton", "solution", "pass", 0.8, 0.88, 9, "meets the bar")
    exercise_csv.write_exercise_rows([again], provenance, "nvidia-h200")
    rows = exercise_csv.read_exercise_rows("nvidia-h200")
    assert [(r.exercise, r.status, r.ms, r.seed) for r in rows] == [("copy_float4", "pass", 0.49, 7),
                                                                    ("scale_add", "pass", 0.8, 9)]


def test_an_unknown_source_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("LABMAGIC_ROOT", str(tmp_path))
    with pytest.raises(LabError, match="source 'mine' is not one of solution, notebook"):
        exercise_csv.write_exercise_rows([ExerciseRow("c", "e", "cuda", "mine", "pass")], {}, "nvidia-h200")
