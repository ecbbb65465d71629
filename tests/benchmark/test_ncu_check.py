"""``%bench --nsight`` and ``labmagic sweep --timer nsight`` on a CPU: ncu's rows split into calls by the marker
kernels, medians and verdicts, the CSV, the table, the note without a GPU, the sweep's flag, and the child's mode."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest
import torch

import labmagic
from labmagic.benchmark import Race
from labmagic.benchmark import ncu_check as nc
from labmagic.benchmark.race import BenchResult
from labmagic.child.ncu_report import parse_raw_csv
from labmagic.child.ncu_time import read_jobs, write_jobs
from labmagic.child.protocol import child_env, child_record
from labmagic.errors import LabError
from labmagic.runtime import device_slug
from labmagic.store.schema import OK, Row

# ``ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv --page raw
# --print-units base --log-file LOG``, as ncu 2025.x writes LOG: its ==PROF== lines, the header, the units row, then
# one row per launch in launch order. The child ran 5 jobs of 3 calls each (every call between two spin_kernel
# markers): a one-kernel CUDA variant, a JAX call of two kernels, a three-kernel variant, a short torch add, a variant
# that failed after its first marker, and one more one-kernel variant after it (its attribution must survive the
# failure before it).
HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC","gpu__time_duration.sum"')
UNITS = '"","","","","","","","","","","","nsecond"'


def _launches(names_ns):
    rows = []
    for i, (name, ns) in enumerate(names_ns):
        rows.append(f'"{i}","51234","python3.11","127.0.0.1","{name}","1","7","(256, 1, 1)","(65536, 1, 1)","0",'
                    f'"9.0","{ns}"')
    return rows


M = ("spin_kernel", "1,184")  # the marker: torch.cuda._sleep(1)
LAUNCHES = [
    M, ("vecadd_float4", "774,592"), M, ("vecadd_float4", "772,064"), M, ("vecadd_float4", "780,128"), M,
    M, ("input_add_fusion", "390,016"), ("loop_convert_fusion", "12,000"),
    M, ("input_add_fusion", "391,040"), ("loop_convert_fusion", "11,968"),
    M, ("input_add_fusion", "389,120"), ("loop_convert_fusion", "12,032"), M,
    M, ("split_a", "100,000"), ("split_b", "50,000"), ("split_c", "25,000"),
    M, ("split_a", "101,000"), ("split_b", "50,000"), ("split_c", "25,000"),
    M, ("split_a", "99,000"), ("split_b", "50,000"), ("split_c", "25,000"), M,
    M, ("elementwise_kernel", "7,936"), M, ("elementwise_kernel", "8,064"), M, ("elementwise_kernel", "8,000"), M,
    M, ("broken_kernel", "5,000"),
    M, ("vecadd_grid_stride", "201,000"), M, ("vecadd_grid_stride", "200,000"), M, ("vecadd_grid_stride", "199,500"), M,
]
CSV_LOG = "\n".join(["==PROF== Connected to process 51234 (/usr/bin/python3.11)", "LABMAGIC-CHILD {}", HEADER, UNITS,
                     *_launches(LAUNCHES), "==PROF== Disconnected from process 51234"]) + "\n"

JOBS = [("cuda_float4", "268435456", 4, 3), ("pallas", "67108864", 4, 3), ("cuda_split3", "67108864", 4, 3),
        ("torch", "1048576", 4, 3), ("cuda_broken", "67108864", 1, 0), ("cuda_grid_stride", "67108864", 4, 3)]
RECORD = {"ok": True, "mode": "nsight-time", "iters": 3, "marker": "spin_kernel",
          "jobs": [{"variant": v, "shape": s, "markers": m, "calls": c} for v, s, m, c in JOBS]}
RECORD["jobs"][4]["error"] = "RuntimeError: CUDA error: an illegal memory access was encountered"
EVENT_MS = {"cuda_float4": 0.790, "pallas": 0.500, "cuda_split3": 0.176, "torch": 0.012, "cuda_broken": 0.3,
            "cuda_grid_stride": 0.150}


def _rows():
    return [nc.NsightRow(v, s, "float32", EVENT_MS[v]) for v, s, _, _ in JOBS]


def _check(rows=None, **kw):
    rows = rows if rows is not None else _rows()
    if rows and rows[0].nsight_ms is None:
        nc.job_rows(parse_raw_csv(CSV_LOG), RECORD, rows)
    return nc.NsightCheck("01_vector_add", "NVIDIA H200", 3, rows, **kw)


def test_the_fixture_parses_as_launch_ordered_kernels_in_seconds():
    kernels = parse_raw_csv(CSV_LOG)
    assert len(kernels) == len(LAUNCHES)
    assert kernels[1].name == "vecadd_float4" and kernels[1].duration_s == pytest.approx(774.592e-6)


def test_markers_split_the_kernels_into_each_jobs_calls():
    calls = nc.split_calls(parse_raw_csv(CSV_LOG), RECORD["jobs"])
    kernels_per_call = [[len(call) for call in job] for job in calls]
    assert kernels_per_call == [[1, 1, 1], [2, 2, 2], [3, 3, 3], [1, 1, 1], [], [1, 1, 1]]
    assert {k.name for k in calls[1][2]} == {"input_add_fusion", "loop_convert_fusion"}
    assert [k.name for k in calls[5][0]] == ["vecadd_grid_stride"]  # after the failed job, still its own kernels


def test_launch_order_is_the_id_order_whatever_the_row_order():
    shuffled = list(reversed(parse_raw_csv(CSV_LOG)))
    calls = nc.split_calls(shuffled, RECORD["jobs"])
    assert [k.name for k in calls[2][0]] == ["split_a", "split_b", "split_c"]


def test_a_marker_count_that_differs_from_the_childs_is_an_error_not_a_guess():
    kernels = [k for k in parse_raw_csv(CSV_LOG) if k.id != 0]  # one marker lost
    with pytest.raises(LabError, match=r"profiled 20 marker kernels \(spin_kernel\) where the child launched 21"):
        nc.split_calls(kernels, RECORD["jobs"])


def test_each_call_is_the_sum_of_its_kernels_and_each_row_the_median_of_its_calls():
    rows = {r.variant: r for r in _check().rows}
    assert rows["cuda_float4"].nsight_ms == pytest.approx(0.774592)
    assert rows["pallas"].nsight_ms == pytest.approx((390.016 + 12.000) / 1e3)  # median of 402.016, 403.008, 401.152
    assert rows["pallas"].kernels == 2 and rows["pallas"].calls == 3
    assert rows["cuda_split3"].nsight_ms == pytest.approx(0.175) and rows["cuda_split3"].kernels == 3
    assert rows["torch"].nsight_ms == pytest.approx(0.008)
    assert rows["cuda_grid_stride"].nsight_ms == pytest.approx(0.2)
    assert rows["cuda_broken"].nsight_ms is None and "illegal memory access" in rows["cuda_broken"].note


def test_verdicts_agree_within_five_percent_from_fifty_us_and_short_calls_are_not_judged():
    rows = {r.variant: r for r in _check().rows}
    assert rows["cuda_float4"].ratio == pytest.approx(0.790 / 0.774592)
    assert rows["cuda_float4"].verdict == nc.AGREES
    assert rows["pallas"].verdict == nc.DISAGREES  # 0.500 / 0.402 = 1.24
    assert rows["cuda_split3"].verdict == nc.AGREES
    assert rows["torch"].verdict == nc.SHORT
    assert rows["cuda_broken"].verdict == nc.MISSING
    assert rows["cuda_grid_stride"].verdict == nc.DISAGREES  # 0.75: events faster than the kernels


@pytest.mark.parametrize("event_ms, nsight_ms, expected", [
    (1.0, 1.05, nc.AGREES), (1.049, 1.0, nc.AGREES), (1.0, 1.06, nc.DISAGREES), (1.051, 1.0, nc.DISAGREES),
    (0.049, 0.048, nc.SHORT), (0.060, 0.030, nc.DISAGREES), (0.030, 0.060, nc.DISAGREES),
    (None, 1.0, nc.MISSING), (1.0, None, nc.MISSING), (1.0, 0.0, nc.MISSING),
])
def test_verdict_boundaries(event_ms, nsight_ms, expected):
    assert nc.verdict(event_ms, nsight_ms) == expected


def test_worst_ratio_is_the_judged_ratio_farthest_from_one_and_ignores_short_calls():
    check = _check()
    assert check.worst_ratio == pytest.approx(0.15 / 0.2)  # |log 0.75| > |log 1.24|; torch's 1.5 is short
    assert nc.NsightCheck("x", "gpu", 3, [nc.NsightRow("torch", "8", "float32", 0.01, 0.008)]).worst_ratio is None


def test_the_table_shows_both_medians_ratio_and_verdict_and_escapes_html():
    check = _check(notes=["nsight: <b>odd</b> note"])
    text = repr(check)
    line = next(ln for ln in text.splitlines() if ln.startswith("cuda_float4"))
    assert line.split()[:6] == ["cuda_float4", "268435456", "0.79", "0.7746", "1.020", "1"] and "agrees" in line
    assert "short (<50 us, launch-bound)" in text and "2 of 4 judged rows agree; worst ratio 0.750" in text
    page = check._repr_html_()
    assert "<td>pallas</td>" in page and "&lt;b&gt;odd&lt;/b&gt;" in page and "<b>odd</b>" not in page
    assert page.count('style="color:#b00"') == 2  # the two judged rows that disagree


def test_a_bench_result_shows_its_check_under_its_table():
    row = Row("01_vector_add", "cuda_float4", "cuda", "268435456", "float32", OK, ms_median=0.79)
    result = BenchResult("01_vector_add", [row], True, "NVIDIA H200", None, None)
    assert "Nsight Compute cross-check" not in repr(result)
    result.nsight_check = _check()
    assert "Nsight Compute cross-check: 01_vector_add" in repr(result)
    assert "labmagic-nsight" in result._repr_html_()


def test_the_csv_replaces_this_runs_rows_and_keeps_the_others(tmp_path, monkeypatch):
    monkeypatch.setenv("LABMAGIC_ROOT", str(tmp_path))
    prov = {"git_commit": "abc123", "timestamp": "2026-01-01T00:00:00+00:00", "gpu": "NVIDIA H200"}
    first = nc.save_check(_check(provenance=prov))
    assert first == tmp_path / "results" / device_slug() / "nsight_check" / "01_vector_add.csv"
    again = nc.NsightCheck("01_vector_add", "NVIDIA H200", 3, [nc.NsightRow("torch", "1048576", "float32", 0.5, 0.5)],
                           provenance={**prov, "git_commit": "def456"})
    nc.save_check(again, first)
    with open(first, newline="") as handle:
        reader = csv.DictReader(handle)
        rows = list(reader)
    assert tuple(reader.fieldnames) == nc.COLUMNS
    assert len(rows) == len(JOBS)
    torch_row = next(r for r in rows if r["variant"] == "torch")
    assert (torch_row["event_ms"], torch_row["ratio"], torch_row["verdict"], torch_row["git_commit"]) == (
        "0.5", "1", "agrees", "def456")
    f4 = next(r for r in rows if r["variant"] == "cuda_float4")
    assert f4["git_commit"] == "abc123" and f4["verdict"] == "agrees" and float(f4["nsight_ms"]) == pytest.approx(
        0.774592)
    assert next(r for r in rows if r["variant"] == "cuda_broken")["nsight_ms"] == ""
    assert not [p for p in first.parent.iterdir() if p.name != first.name]  # no temporary file left


def test_the_ncu_command_times_with_boost_clocks_and_per_kernel_flushes():
    cmd = nc.ncu_time_command("ncu", "log.csv", ["python", "-m", "labmagic.child"])
    joined = " ".join(cmd)
    assert "--clock-control none" in joined and "--profile-from-start off" in joined
    assert "--metrics gpu__time_duration.sum" in joined and "--page raw --print-units base" in joined
    assert "--cache-control" not in joined  # ncu's default flushes the caches before each kernel: cold L2
    assert cmd[-3:] == ["python", "-m", "labmagic.child"]


# -- without a GPU ----------------------------------------------------------------------------------------

cpu_only = pytest.mark.skipif(labmagic.has_gpu(), reason="CPU-mode behaviour (a prediction, nothing timed)")


@pytest.fixture
def race_shell(shell, monkeypatch):
    from labmagic.magics.bench_magic import TIMER_ENV

    monkeypatch.setenv(TIMER_ENV, "")
    monkeypatch.setitem(shell.ns, "nsight_race", Race(
        chapter="test_race", variants={"torch": torch.add}, ref="torch",
        make_inputs=lambda *s: (torch.randn(*s), torch.randn(*s)), shapes=[16], check_shapes=[(3,)]))
    return shell


@cpu_only
@pytest.mark.parametrize("line, env, asked", [
    ("--nsight", "", True),
    ("", "nsight", True),  # labmagic sweep --timer nsight sets it for the chapters it runs
    ("", "events", False),
    ("", "", False),
])
def test_nsight_without_a_gpu_is_one_note_and_nothing_else(race_shell, monkeypatch, line, env, asked):
    from labmagic.magics.bench_magic import TIMER_ENV

    monkeypatch.setenv(TIMER_ENV, env)
    result = race_shell.run(f"%bench nsight_race --no-plot {line}")
    assert result.notes.count(nc.NO_GPU_NOTE) == (1 if asked else 0)
    assert result.nsight_check is None and "cross-check" not in repr(result).replace(nc.NO_GPU_NOTE, "")


@cpu_only
def test_cross_check_itself_refuses_without_a_gpu(race_shell):
    result = race_shell.run("%bench nsight_race --no-plot")
    with pytest.raises(LabError, match="--nsight needs a CUDA GPU"):
        nc.cross_check(race_shell.ns["nsight_race"], result)


# -- labmagic sweep --timer nsight ----------------------------------------------------------------------------

def test_sweep_timer_nsight_sets_the_env_var_the_chapters_read(monkeypatch, capsys):
    from labmagic.cli import main
    from labmagic.cli import sweep as sweep_cli
    from labmagic.magics.bench_magic import TIMER_ENV, nsight_from_env

    seen = []

    def fake_sweep(chapters, **kwargs):  # what a chapter's kernel would inherit
        seen.append((os.environ.get(TIMER_ENV), nsight_from_env()))
        return []

    monkeypatch.setenv(TIMER_ENV, "")
    monkeypatch.setattr(sweep_cli, "sweep", fake_sweep)
    monkeypatch.setattr(sweep_cli, "snapshot", lambda *a: None)
    assert main(["sweep", "--timer", "nsight", "01"]) == 0
    assert main(["sweep", "01"]) == 0  # each sweep says what it wants: nothing left from the one before
    assert seen == [("nsight", True), ("events", False)]
    for timer in ("nsight", "graph"):
        assert main(["sweep", "--timer", timer, "--scheduler", "local", "01"]) == 2
        assert f"--timer {timer} runs on this machine's GPUs: drop --scheduler" in capsys.readouterr().err


# -- the child's mode ----------------------------------------------------------------------------------------

def test_jobs_round_trip_in_order(tmp_path):
    path = write_jobs(tmp_path / "jobs.json", [("cuda_float4", (4096, 4096)), ("pallas", "2048"), ("torch", (7,)),
                                               ("triton", None)])
    # A job without a shape runs at the race's largest (what %ncu of several variants asks for by default).
    assert read_jobs(path) == [("cuda_float4", (4096, 4096)), ("pallas", (2048,)), ("torch", (7,)), ("triton", None)]


@pytest.mark.parametrize("content, said", [
    ("not json", "cannot read a JSON list"),
    ("[]", "non-empty JSON list"),
    ('{"variant": "torch", "shape": "8"}', "non-empty JSON list"),
    ('[{"variant": "torch", "shape": "8"}, {"variant": "torch", "shape": 8}]', "job 1 is"),
    ('[{"variant": "torch", "shape": "8xfour"}]', "job 0 is"),
    ('[{"variant": "torch", "shape": "0"}]', "job 0 is"),
    ('[{"variant": "", "shape": "8"}]', "job 0 is"),
])
def test_a_bad_jobs_file_is_one_error_naming_the_job(tmp_path, content, said):
    path = tmp_path / "jobs.json"
    path.write_text(content)
    with pytest.raises(LabError, match=said):
        read_jobs(path)


def _cell(source, tags=()):
    return {"cell_type": "code", "metadata": {"tags": list(tags)}, "source": source, "outputs": [],
            "execution_count": None}


def test_the_child_mode_runs_every_job_in_order_and_reports_each(tmp_path):
    cells = [_cell("%load_ext labmagic\nimport torch\nimport labmagic.benchmark\nCALLS = []"),
             _cell("def doubled(x):\n    CALLS.append(x.numel())\n    return x * 2\n\n"
                   "def broken(x):\n    raise RuntimeError('planted failure')\n\n"
                   "race = labmagic.benchmark.Race(chapter='98_nsight', ref='torch',\n"
                   "    variants={'torch': lambda x: x + x, 'doubled': doubled, 'broken': broken},\n"
                   "    make_inputs=lambda n: (torch.randn(n),), shapes=[(8,), (64,)], nbytes=lambda n: 8 * n)"),
             _cell("%bench race --nsight")]
    notebook = tmp_path / "98_nsight.ipynb"
    notebook.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    jobs = write_jobs(tmp_path / "jobs.json", [("doubled", "16"), ("broken", "16"), ("nope", "8"), ("torch", "32"),
                                               ("doubled", None)])
    proc = subprocess.run([sys.executable, "-m", "labmagic.child", "--chapter", str(notebook), "--mode",
                           "nsight-time", "--jobs", str(jobs), "--iters", "3", "--warmup", "1"],
                          capture_output=True, text=True, env=child_env(), timeout=300)
    record = child_record(proc.stdout)
    assert record.get("ok") is True, proc.stderr[-2000:]
    assert (record["mode"], record["iters"], record["marker"]) == ("nsight-time", 3, "spin_kernel")
    entries = [(j["variant"], j["shape"], j["calls"], "error" in j) for j in record["jobs"]]
    # The job without a shape ran at the race's largest (64), as %ncu does by default.
    assert entries == [("doubled", "16", 3, False), ("broken", "16", 0, True), ("nope", "8", 0, True),
                       ("torch", "32", 3, False), ("doubled", "64", 3, False)]
    assert "planted failure" in record["jobs"][1]["error"] and "no variant 'nope'" in record["jobs"][2]["error"]
    assert [j.get("nbytes") for j in record["jobs"]] == [128, 128, 64, 256, 512]  # the race's prediction there
    marked = torch.cuda.is_available()  # without a GPU there is nothing to mark (and no ncu to read the marks)
    assert [j["markers"] for j in record["jobs"]] == ([4, 1, 0, 4, 4] if marked else [0, 0, 0, 0, 0])


def test_the_child_mode_without_jobs_says_so(tmp_path):
    with pytest.raises(LabError, match="needs --jobs FILE"):
        read_jobs(None)
