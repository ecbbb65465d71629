"""benchmarks/launch_overhead.py: its dry run compiles, times the cached cells through a real shell, plans the rest."""

from __future__ import annotations

import csv

from benchscripts import load_script


def test_dry_run_times_the_three_cached_cell_variants(tmp_path, capsys):
    lo = load_script("launch_overhead")
    assert lo.main(["--dry-run", "--out", str(tmp_path), "--repeats", "3"]) == 0
    out = capsys.readouterr().out
    assert "compiled <CudaKernel touch(float* x, const float* y, int n)" in out
    assert out.count("  labmagic  ") == 3 and "launch_arrays" in out and "triton" in out  # the plan of steps 1-2

    with open(tmp_path / "cached_cell.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["variant"] for r in rows] == ["plain", "panel", "panel_vs"]
    for r in rows:
        assert 0 < float(r["ms_min"]) <= float(r["ms_median"]), r
        assert float(r["first_ms"]) > 0 and r["repeats"] == "3" and r["gpu"] and r["timestamp"]

    profile = (tmp_path / "cached_cell_profile.txt").read_text()
    own = profile.split("labmagic's own functions")[1]
    assert "build_panel" in own and "kernel_panels" in own  # the profiled run really drew the --vs panel
    # A dry run launches nothing, so it writes no launch numbers.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cached_cell.csv", "cached_cell_profile.txt"]


def test_time_batches_reports_per_call_microseconds_and_keeps_to_its_budget():
    lo = load_script("launch_overhead")
    seen, syncs = [], []
    per_call = lo.time_batches(seen.append, calls=50, batches=4, budget_s=60.0, sync=lambda: syncs.append(1))
    assert len(per_call) == 4 and all(us > 0 for us in per_call)
    assert seen == list(range(50)) * 4 and len(syncs) == 8  # each call sees its index; sync around each batch
    assert len(lo.time_batches(lambda i: None, calls=10, batches=5, budget_s=0.0, sync=lambda: None)) == 1
