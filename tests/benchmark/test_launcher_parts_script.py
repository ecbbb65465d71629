"""benchmarks/launcher_parts.py: each part a launcher calls, timed alone, one CSV row a part (tensor maps on a GPU)."""

from __future__ import annotations

import csv

from benchscripts import load_script

import labmagic


def test_every_part_is_timed_and_written_with_its_provenance(tmp_path, capsys):
    lp = load_script("launcher_parts")
    assert lp.main(["--out", str(tmp_path), "--calls", "200", "--repeats", "2"]) == 0
    with open(tmp_path / "launcher_parts.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    names = [r["what"] for r in rows]
    assert names[:6] == ["require_tensor, 2-D uint8 (dim, device)", "require_tensor, 1-D fp32 (align 4)",
                         "triton.cdiv", "labmagic.cdiv", "triton.next_power_of_2", "labmagic.next_power_of_2"]
    assert ("tensor_map_2d, a cached map" in names) == labmagic.has_gpu()  # a map needs the driver
    for r in rows:
        assert 0 < float(r["us_per_call_min"]) <= float(r["us_per_call_median"]), r
        assert r["calls"] == "400" and r["gpu"] and r["git_commit"] and r["timestamp"]
    assert "labmagic.cdiv" in capsys.readouterr().out
