"""``bench(..., sanitize=True)`` on CPU: the no-GPU note, the not-a-chapter note, and a memcheck finding becoming
the variant's ``error`` verdict (compute-sanitizer itself replaced at the point of use; the real run is in
test_sanitizer_check_gpu)."""

from __future__ import annotations

import json

import pytest
import torch

import labmagic
from labmagic.benchmark import Race, bench, sanitizer_check
from labmagic.child.sanitizer_report import Finding
from labmagic.child.sanitizer_run import SanitizeResult
from labmagic.store.schema import ERROR, OK

SOURCE = "  if (i <= n) c[i] = a[i] + b[i];  // one past the end"


def _race(chapter: str) -> Race:
    return Race(chapter=chapter, ref="torch", variants={"torch": torch.add, "cuda_oob": torch.add,
                                                         "triton_x": torch.add, "cuda_bad": torch.add},
                make_inputs=lambda n: (torch.randn(n), torch.randn(n)), shapes=[64], check_shapes=[31, 1023, 5])


def _finding(kernel="vecadd_oob", line=4, kind="Invalid __global__ write of size 4 bytes") -> Finding:
    return Finding(tool="memcheck", kind=kind, kernel=kernel, file="cell", line=line, count=3,
                   source_line=SOURCE.strip())


def _sanitized(race):
    """The verdicts of a race whose check passed, and the notes, after the memcheck pass over it."""
    verdicts, notes = _verdicts(race), []
    sanitizer_check.sanitize_checked(race, list(race.variants), verdicts, notes)
    return verdicts, notes


def _verdicts(race):
    return {n: (OK, "", 0.0) for n in race.variants} | {"cuda_bad": (ERROR, "at 31: it raised", None)}


@pytest.mark.skipif(labmagic.has_gpu(), reason="the no-GPU path")
def test_without_a_gpu_sanitize_is_one_note_and_nothing_runs(monkeypatch):
    monkeypatch.setattr(sanitizer_check, "sanitize_variant", lambda *a, **k: pytest.fail("sanitizer ran without a GPU"))
    result = bench(_race("test_race"), sanitize=True, plot=False)
    assert [n for n in result.notes if "sanitize" in n] == ["sanitize needs a GPU: nothing ran under memcheck"]
    assert not [n for n in bench(_race("test_race"), plot=False).notes if "sanitize" in n]


def test_a_race_that_is_no_chapter_on_disk_is_a_note_not_a_failure(tmp_path, monkeypatch):
    monkeypatch.setenv("LABMAGIC_ROOT", str(tmp_path))
    monkeypatch.setattr(sanitizer_check, "sanitize_variant", lambda *a, **k: pytest.fail("no chapter to replay"))
    race = _race("97_scratch")
    verdicts, notes = _sanitized(race)
    assert verdicts == _verdicts(race)
    assert notes == ["sanitize: race '97_scratch' is not a chapter notebook in book/ (the child replays the chapter "
                     "from disk): not sanitized"]


@pytest.fixture
def chapter(tmp_path, monkeypatch):
    monkeypatch.setenv("LABMAGIC_ROOT", str(tmp_path))
    (tmp_path / "book").mkdir()
    path = tmp_path / "book" / "97_oob.ipynb"
    path.write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def test_a_finding_makes_the_cuda_variant_an_error_naming_kernel_and_cell_line(chapter, monkeypatch):
    calls = []

    def fake(chapter_, variant, shape=None, *, tool):
        calls.append((chapter_, variant, shape, tool))
        findings = [_finding(), _finding(kind="Invalid __global__ read of size 4 bytes"),
                    Finding(tool="memcheck", kind="Program hit cudaErrorLaunchFailure", severity="api")]
        return SanitizeResult("97_oob", variant, shape, tool, findings if variant == "cuda_oob" else [], 0 if
                              variant != "cuda_oob" else 2)

    monkeypatch.setattr(sanitizer_check, "sanitize_variant", fake)
    race = _race("97_oob")
    verdicts, notes = _sanitized(race)
    # Only the CUDA variant that passed its check, at the largest check shape; not the reference, not Triton.
    assert calls == [(str(chapter.resolve()), "cuda_oob", "1023", "memcheck")]
    assert verdicts["cuda_oob"] == (ERROR, "memcheck: Invalid __global__ write of size 4 bytes in vecadd_oob at cell "
                                           "line 4: if (i <= n) c[i] = a[i] + b[i];  // one past the end (+1 more)", 0.0)
    assert verdicts["cuda_bad"] == (ERROR, "at 31: it raised", None)
    assert verdicts["torch"] == verdicts["triton_x"] == (OK, "", 0.0)
    assert notes == []


def test_a_clean_run_keeps_the_verdict_and_a_child_that_died_is_a_note(chapter, monkeypatch):
    monkeypatch.setattr(sanitizer_check, "sanitize_variant", lambda c, v, s=None, *, tool: SanitizeResult(
        "97_oob", v, s, tool, [], 0, child_error="NameError: name 'vecadd' is not defined"))
    race = _race("97_oob")
    verdicts, notes = _sanitized(race)
    assert verdicts == _verdicts(race)
    assert notes == ["sanitize: cuda_oob did not run in the child (NameError: name 'vecadd' is not defined); "
                     "not sanitized"]


def test_a_finding_without_line_info_says_how_to_get_it():
    result = SanitizeResult("97_oob", "cuda_oob", "31", "memcheck", [_finding(line=None)], 1)
    assert sanitizer_check.memcheck_reason(result) == ("memcheck: Invalid __global__ write of size 4 bytes in vecadd_oob "
                                                "(no line info: compile with -lineinfo)")
    assert sanitizer_check.memcheck_reason(SanitizeResult("97_oob", "cuda_oob", "31", "memcheck", [], 0)) is None
