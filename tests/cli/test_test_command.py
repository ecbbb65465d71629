"""``labmagic test CHAPTER``: a real chapter notebook replayed on CPU, the table printed, the exit status the verdict."""

from __future__ import annotations

import subprocess
import sys

import pytest
from sitebuild import write_chapter

import labmagic
from labmagic.child.protocol import child_env

pytestmark = pytest.mark.skipif(labmagic.has_gpu(), reason="CPU-mode behaviour (CUDA variants are needs_gpu)")

RACE_CELL = '''import torch
import labmagic.benchmark

def added(a, b):
    return a + b

def wrong(a, b):
    return a - b if a.numel() > 8 else a + b

variants = {{"torch": added, "twice": lambda a, b: b + a}}
if {with_wrong}:
    variants["wrong"] = wrong
race = labmagic.benchmark.Race(chapter="98_scratch", variants=variants, ref="torch",
    make_inputs=lambda n: (torch.randn(n), torch.randn(n)), shapes=[64], check_shapes=[(3,), (17,)])'''


def labmagic_test(*argv, cwd=None):
    return subprocess.run([sys.executable, "-m", "labmagic.cli", "test", *map(str, argv)], capture_output=True,
                          text=True, env=child_env(LABMAGIC_FORCE_CPU="1"), cwd=cwd, timeout=300)


@pytest.fixture
def scratch(tmp_path):
    def chapter(with_wrong: bool):
        return write_chapter(tmp_path / f"98_scratch_{int(with_wrong)}.ipynb", RACE_CELL.format(with_wrong=with_wrong),
                             "%bench race")
    return chapter


def test_a_mismatching_variant_exits_1_naming_it_and_its_shape(scratch):
    proc = labmagic_test(scratch(True))
    assert proc.returncode == 1, proc.stderr
    row = next(line for line in proc.stdout.splitlines() if line.startswith("wrong "))
    assert row.split()[2:3] == ["MISMATCH"] and " 17 " in row and "at 17:" in row
    assert proc.stdout.rstrip().endswith("FAILED: 2 pass, 1 MISMATCH")


def test_all_passing_exits_0_and_variant_narrows(scratch):
    path = scratch(False)
    proc = labmagic_test(path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.rstrip().endswith("passed: 2 pass")
    proc = labmagic_test(scratch(True), "--variant", "twice", "--shape", "64")
    assert proc.returncode == 0 and "check shapes 64 " in proc.stdout and "wrong" not in proc.stdout


def test_bad_input_is_one_line_and_exit_2(scratch):
    proc = labmagic_test(scratch(False), "--variant", "nope")
    assert proc.returncode == 2 and proc.stderr.strip() == "LabError: unknown variants: nope (race has torch, twice)"
    proc = labmagic_test(scratch(False), "--shape", "abc")
    assert proc.returncode == 2 and "is not a size" in proc.stderr


def test_chapter_01_passes_on_cpu_with_cuda_variants_needing_a_gpu():
    proc = labmagic_test("01", "-p", "size=quick")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {line.split()[0]: line.split()[2] for line in proc.stdout.splitlines()[2:] if line.strip()
            and len(line.split()) > 2 and line.split()[1] in ("torch", "cuda", "triton", "pallas")}
    assert rows["torch"] == rows["triton"] == rows["pallas"] == "pass"
    assert {v for v, s in rows.items() if s == "needs"} == {"cuda_naive", "cuda_float4", "cuda_grid_stride"}
    assert "3 variants need a GPU" in proc.stdout and proc.stdout.rstrip().endswith("passed: 3 pass, 3 needs GPU")


def test_a_race_benched_after_the_first_bench_is_found_by_name(tmp_path):
    """``labmagic test 08 --race race_w8a8``: a race defined and benched after the chapter's first %bench (chapter
    08's race_w8a8) is replayed through its own cell, not only up to the first %bench."""
    path = write_chapter(tmp_path / "98_scratch_late.ipynb", RACE_CELL.format(with_wrong=False), "%bench race",
                         RACE_CELL.format(with_wrong=True).replace("race = ", "race_late = "), "%bench race_late")
    proc = labmagic_test(path, "--race", "race_late")
    assert proc.returncode == 1 and "wrong " in proc.stdout, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("FAILED: 2 pass, 1 MISMATCH")


def test_chapter_08s_w8a8_race_is_replayed_with_its_peers_skipped_on_cpu():
    """race_w8a8 is benched after chapter 08's first %bench, and its variants were defined in a no-replay check cell:
    the replay reaches it now, the chapter's three variants pass, and the peers (torchao, gemlite; the .[peers] extra
    CI does not install) read skipped, or needs GPU where they are installed."""
    proc = labmagic_test("08", "-p", "size=quick", "--race", "race_w8a8")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {line.split()[0]: line.split()[1:3] for line in proc.stdout.splitlines() if line.strip()}
    assert all(rows[v] == [b, "pass"] for v, b in
               (("bf16_cublas", "cublas"), ("unfused_torch", "torch"), ("triton_w8a8", "triton")))
    assert rows["torchao_w8a8"][0] == "torchao" and rows["gemlite_w8a8"][0] == "gemlite"
    assert {rows["torchao_w8a8"][1], rows["gemlite_w8a8"][1]} <= {"skipped", "needs"}
