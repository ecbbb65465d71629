"""What a sweep's run record says of its races: the variants' outcomes and what the rows' host figures cost it (#49's
"host-time measurement adds at most 10% to a chapter's sweep time", read off every run rather than argued)."""

from __future__ import annotations

import time

from labmagic.benchmark import runner
from labmagic.store import manifest
from labmagic.store.schema import OK, Row
from labmagic.timing.timers import HostTiming


class _SlowHost:
    """A timer whose host figures take a known wall time."""

    def __init__(self, seconds):
        self.seconds = seconds

    def host(self, fn, input_sets, device_ms):
        time.sleep(self.seconds)
        return HostTiming(0.02, 0.05, 3)


def _row(variant):
    return Row(chapter="04_delta", variant=variant, backend="torch", shape="16", dtype="float32", status=OK,
               ms_median=0.01)


def test_the_host_figures_wall_time_reaches_the_runs_rows_file_beside_the_outcomes(tmp_path, monkeypatch):
    rows_file = tmp_path / "run.rows"
    monkeypatch.setenv(manifest.RUN_ROWS_ENV, str(rows_file))
    rows = [_row("torch"), _row("triton")]
    for row in rows:
        runner._host_figures(_SlowHost(0.05), print, [()], row)
    manifest.note_rows(rows)
    assert [(r.host_ms, r.isolated_ms) for r in rows] == [(0.02, 0.05)] * 2
    assert 0.1 <= manifest.host_seconds(rows_file) < 1.0
    assert manifest.variant_counts(rows_file) == {"pass": 2, "skipped": 0, "needs_gpu": 0, "fail": 0}


def test_a_host_call_that_raises_is_still_counted_and_leaves_the_figures_empty(tmp_path, monkeypatch):
    class Broken(_SlowHost):
        def host(self, fn, input_sets, device_ms):
            time.sleep(self.seconds)
            raise RuntimeError("synchronises inside the call")

    rows_file = tmp_path / "run.rows"
    monkeypatch.setenv(manifest.RUN_ROWS_ENV, str(rows_file))
    row = _row("torch")
    runner._host_figures(Broken(0.02), print, [()], row)
    assert row.host_ms is None and "host timing failed" in row.error
    assert manifest.host_seconds(rows_file) >= 0.02


def test_outside_a_sweep_nothing_is_written_and_an_absent_file_counts_zero(tmp_path, monkeypatch):
    monkeypatch.delenv(manifest.RUN_ROWS_ENV, raising=False)
    manifest.note_host_seconds(1.5)
    assert manifest.host_seconds(tmp_path / "none.rows") == 0.0
    garbled = tmp_path / "garbled.rows"
    garbled.write_text('{"host_seconds": 0.5}\nnot json\n[1, 2]\n{"host_seconds": "x"}\n{"host_seconds": 0.25}\n')
    assert manifest.host_seconds(garbled) == 0.75
