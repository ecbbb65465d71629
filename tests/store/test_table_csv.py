"""The benchmark scripts' side tables: one CSV, columns in the rows' order, the folder made, nothing half-written."""

from __future__ import annotations

import csv

import pytest

from labmagic.errors import LabError
from labmagic.store.table_csv import write_table


def test_rows_round_trip_with_their_column_order_and_the_folder_is_made(tmp_path):
    rows = [{"variant": "cuda_decode", "duration_us": 69.7, "grid": 2048},
            {"variant": "sdpa_cudnn", "duration_us": 67.52, "grid": 256}]
    path = write_table(rows, tmp_path / "nvidia-h200" / "decode_profile.csv")
    with path.open() as handle:
        back = list(csv.DictReader(handle))
    assert list(back[0]) == ["variant", "duration_us", "grid"]
    assert [r["duration_us"] for r in back] == ["69.7", "67.52"]


def test_a_second_write_replaces_the_table(tmp_path):
    path = tmp_path / "t.csv"
    write_table([{"a": 1}, {"a": 2}], path)
    write_table([{"a": 3}], path)
    assert path.read_text().splitlines() == ["a", "3"]


def test_no_rows_is_an_error_not_an_empty_file(tmp_path):
    with pytest.raises(LabError, match="no rows"):
        write_table([], tmp_path / "t.csv")
    assert not (tmp_path / "t.csv").exists()
