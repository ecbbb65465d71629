"""labmagic.benchmark.write_back and benchmarks/flush_write_back.py: the paired medians, the row the script writes
and reads back, and its run without a GPU (a plan, nothing written)."""

from __future__ import annotations

import pytest
from benchscripts import load_script

from labmagic.benchmark.write_back import COLUMNS, format_row, read_write_back_csv, summarize
from labmagic.store.table_csv import write_table


def test_the_write_back_is_the_median_of_paired_differences_not_the_difference_of_medians():
    after_read = [40.0, 41.0, 42.0, 43.0, 44.0, 60.0, 61.0]
    after_zero = [47.0, 48.0, 49.0, 50.0, 51.0, 62.0, 63.0]  # +7 on most pairs, +2 on the two slow ones
    row = summarize(after_read, after_zero, [30.0] * 7, [25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0])
    assert (row["pairs"], row["after_read_us"], row["after_zero_us"], row["zero_flush_us"]) == (7, 43.0, 50.0, 28.0)
    assert row["write_back_us"] == 7.0
    assert (row["write_back_low_us"], row["write_back_high_us"]) == (2.0, 7.0)  # [min, max]: 7 pairs give 98.4%
    # Where a slow call lands in one flush's samples only, the medians' difference (31 - 20) is not the charge (2).
    assert summarize([10.0, 20.0, 30.0], [12.0, 40.0, 31.0], [1.0], [1.0])["write_back_us"] == 2.0
    assert summarize([1.0] * 3, [2.0] * 3, [1.0], [1.0])["write_back_low_us"] is None  # too few pairs for 95%
    with pytest.raises(ValueError, match="paired samples needed: 3 after reading, 2 after zero_"):
        summarize([1.0] * 3, [2.0] * 2, [1.0], [1.0])


def test_a_row_the_script_writes_reads_back(tmp_path):
    timed = summarize([44.0] * 10, [50.5] * 10, [30.0] * 10, [28.0] * 10)
    row = format_row(dict(timed, kernel="torch.add float32", n=2**24, kernel_bytes=12 * 2**24, l2_bytes=2**20,
                          flush_bytes=2**21, gpu="NVIDIA H200", driver="580", cuda="13.0", torch="2.11.0",
                          git_commit="abc1234", timestamp="t"))
    assert list(row) == list(COLUMNS) and row["write_back_us"] == "6.50"
    path = write_table([row], tmp_path / "flush_write_back.csv")
    (back,) = read_write_back_csv(path)
    assert back["write_back_us"] == 6.5 and back["pairs"] == 10 and back["n"] == 2**24 and back["gpu"] == "NVIDIA H200"
    with pytest.raises(ValueError, match="needs gpu, driver, cuda, torch, git_commit, timestamp"):
        format_row(timed | {"kernel": "k", "n": 1, "kernel_bytes": 1, "l2_bytes": 1, "flush_bytes": 1})


def test_without_a_gpu_the_script_prints_its_plan_and_writes_nothing(tmp_path, capsys):
    script = load_script("flush_write_back")
    out = tmp_path / "flush_write_back.csv"
    assert script.main(["--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "plan: torch.add float32 of 16777216 elements (201 MB)" in printed and "200 pairs alternating" in printed
    assert "no GPU: nothing timed, nothing written" in printed and not out.exists()
    with pytest.raises(SystemExit):
        script.main(["--pairs", "3"])
