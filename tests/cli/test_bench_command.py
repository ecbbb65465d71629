"""``labmagic bench CHAPTER``: a real chapter replayed in a child on CPU (``LABMAGIC_FORCE_CPU=1``), its tables
printed as Markdown, and every name that does not exist refused in one line that names what does (exit status 2)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from sitebuild import write_chapter

from labmagic.child.protocol import child_env

RACES_CELL = '''import torch
import labmagic.benchmark

def added(a, b):
    return a + b

def wrong(a, b):
    return a - b if a.numel() > 8 else a + b

def make(n):
    return torch.randn(n), torch.randn(n)

race = labmagic.benchmark.Race(chapter="98_scratch", variants={"torch": added, "twice": lambda a, b: b + a,
    "wrong": wrong}, ref="torch", make_inputs=make, shapes=[64, 128], check_shapes=[(3,), (17,)])'''

#: Defined after the first %bench, as chapter 08's race_w8a8 is: reached only by naming it.
LATE_CELL = '''race_late = labmagic.benchmark.Race(chapter="98_scratch", variants={"torch": added, "late": added},
    ref="torch", make_inputs=make, shapes=[32], check_shapes=[(5,)])'''


def labmagic_bench(*argv):
    return subprocess.run([sys.executable, "-m", "labmagic.cli", "bench", *map(str, argv)], capture_output=True,
                          text=True, env=child_env(LABMAGIC_FORCE_CPU="1"), timeout=600)


def said(proc) -> list[str]:
    """What the command said on stderr, less its progress line."""
    return [line for line in proc.stderr.splitlines() if not line.startswith("replaying ")]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return write_chapter(tmp_path_factory.mktemp("bench") / "98_scratch.ipynb", RACES_CELL, "%bench race", LATE_CELL,
                         "%bench race_late --no-plot", "raise RuntimeError('the replay must stop before this cell')")


def test_bench_01_quick_prints_a_markdown_table_per_shape_with_the_cuda_rows_needing_a_gpu():
    proc = labmagic_bench("01", "--quick")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("## race\n") and "nothing was measured (no GPU)" in out
    headings = [line for line in out.splitlines() if line.startswith("### ")]
    assert [h.split()[1:3] for h in headings] == [["1048576", "(float32)"], ["4194304", "(float32)"]]
    header = "| variant | ms | peak mem | TFLOP/s | GB/s | vs torch | host ms | isolated ms | note |"
    assert out.count(header) == 2  # no sdpa column: chapter 01 has no SDPA variant
    for variant in ("cuda_naive", "cuda_float4", "cuda_grid_stride"):
        assert out.count(f"| {variant} | needs GPU |") == 2
    for variant in ("torch", "triton", "pallas"):  # checked on CPU, passed, not timed
        assert out.count(f"| {variant} | not measured |") == 2
    assert "needs GPU (not run on this machine): cuda_naive, cuda_float4, cuda_grid_stride" in out
    assert "rows written to" not in out  # nothing measured, nothing saved


def test_a_race_the_chapter_does_not_bench_is_one_line_naming_those_it_does_without_a_child(scratch):
    proc = labmagic_bench(scratch, "--race", "race_late", "--race", "nope")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == ["LabError: 98_scratch has no race 'nope' (races its %bench lines run: race, "
                                        "race_late)"]


def test_a_variant_that_does_not_exist_is_the_one_line_the_child_sends_back(scratch):
    """The wording of each name's message is in tests/benchmark/test_chapter_bench.py."""
    proc = labmagic_bench(scratch, "--variant", "nope")
    assert proc.returncode == 2 and proc.stdout == ""
    assert said(proc) == ["LabError: race 'race' of 98_scratch has no variant 'nope' (variants: torch, twice, wrong)"]


def test_a_race_benched_after_the_first_bench_is_reached_by_naming_it(scratch):
    proc = labmagic_bench(scratch, "--race", "race_late", "--variant", "late")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("## race_late\n") and "| late | not measured |" in proc.stdout
    assert "## race\n" not in proc.stdout


def test_a_chapter_that_does_not_exist_names_the_chapters_without_starting_a_child():
    proc = labmagic_bench("99")
    assert proc.returncode == 2 and said(proc) == proc.stderr.splitlines()  # no "replaying" line: no child
    assert proc.stderr.startswith("LabError: no chapter '99' in ") and "01_vector_add" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1


def test_check_only_checks_and_a_mismatch_exits_1(scratch):
    proc = labmagic_bench(scratch, "--check")
    assert proc.returncode == 1, proc.stderr
    assert "err / tol" in proc.stdout and "FAILED: 2 pass, 1 MISMATCH" in proc.stdout
    assert "### " not in proc.stdout  # no timing tables
    proc = labmagic_bench(scratch, "--check", "--plot")
    assert proc.returncode == 2 and said(proc) == ["LabError: --check only checks: drop --timer, --nsight and --plot"]


@pytest.mark.parametrize("flags", [["--nsight"], ["--timer", "nsight"]])
def test_nsight_reaches_the_childs_race_and_without_a_gpu_says_there_is_no_cross_check(scratch, flags):
    """Both spellings of the Nsight Compute cross-check reach the race the child runs; on CPU its table says in one
    line why there is none, and the rows are the prediction as without the flag."""
    proc = labmagic_bench(scratch, "--variant", "twice", "--shape", "64", *flags)
    assert proc.returncode == 0, proc.stderr
    assert "- --nsight needs a GPU and Nsight Compute: no cross-check" in proc.stdout
    assert [line.split("|")[1].strip() for line in proc.stdout.splitlines() if line.startswith("| ")] == [
        "variant", "torch", "twice"]


GPU_CELL = '''import torch
import labmagic.benchmark

def make(n):
    return torch.randn(n, device="cuda"), torch.randn(n, device="cuda")

race = labmagic.benchmark.Race(chapter="98_scratch", variants={"torch": torch.add, "torch_twice": lambda a, b: b + a},
    ref="torch", make_inputs=make, shapes=[2**16, 2**20], check_shapes=[(3,), (1023,)], flops=lambda n: n,
    nbytes=lambda n: 12 * n)'''


@pytest.mark.gpu
def test_on_a_gpu_the_rows_reach_the_chapters_csv_as_bench_writes_them_and_plot_draws_the_figures(tmp_path):
    import csv

    from labmagic.runtime import device_slug
    from labmagic.store.schema import COLUMNS

    notebook = write_chapter(tmp_path / "98_scratch.ipynb", GPU_CELL, "%bench race")
    env = child_env(LABMAGIC_ROOT=str(tmp_path))
    bench_dir = tmp_path / "results" / device_slug() / "bench"

    def run(*argv):
        return subprocess.run([sys.executable, "-m", "labmagic.cli", "bench", str(notebook), *argv],
                              capture_output=True, text=True, env=env, timeout=600)

    proc = run("--timer", "graph")
    assert proc.returncode == 0, proc.stderr
    assert f"rows written to {bench_dir / '98_scratch.csv'}" in proc.stdout
    assert not list(bench_dir.glob("*.png"))  # no --plot: the figures are left as they were
    with open(bench_dir / "98_scratch.csv", newline="") as handle:
        reader = csv.DictReader(handle)
        rows = list(reader)
    assert reader.fieldnames == COLUMNS
    assert {(r["variant"], r["shape"]) for r in rows} == {(v, s) for v in ("torch", "torch_twice")
                                                          for s in ("65536", "1048576")}
    for row in rows:
        assert row["status"] == "ok" and row["timer"].startswith("cuda_graph")
        assert float(row["ms_median"]) > 0 and float(row["host_ms"]) > 0 and float(row["isolated_ms"]) > 0
    assert "| torch_twice | " in proc.stdout and "host ms" in proc.stdout
    proc = run("--plot", "--variant", "torch_twice", "--shape", "2**16")
    assert proc.returncode == 0, proc.stderr
    assert list(bench_dir.glob("98_scratch*.png")) and "plots written to" in proc.stdout
    with open(bench_dir / "98_scratch.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 4  # the re-run replaced its rows and kept the others
