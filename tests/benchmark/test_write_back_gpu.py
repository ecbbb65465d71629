"""benchmarks/flush_write_back.py on a GPU: a short run gives every column the page reads, from real timings."""

from __future__ import annotations

import pytest
from benchscripts import load_script

from labmagic.benchmark.write_back import COLUMNS, format_row

pytestmark = pytest.mark.gpu


def test_a_short_run_times_both_flushes_and_the_kernel_after_each():
    from labmagic.timing import CudaTimer

    script = load_script("flush_write_back")
    row = script.measure(log2=22, pairs=8)
    assert row["pairs"] == 8 and row["n"] == 2**22 and row["flush_bytes"] == 2 * CudaTimer.l2_bytes()
    for col in ("after_read_us", "after_zero_us", "read_flush_us", "zero_flush_us"):
        assert 0 < row[col] < 10_000, (col, row)
    assert row["write_back_low_us"] <= row["write_back_us"] <= row["write_back_high_us"], row
    cells = format_row(dict(row, gpu="g", driver="d", cuda="c", torch="t", git_commit="x", timestamp="now"))
    assert list(cells) == list(COLUMNS)
