"""``verify``: the correctness pass alone, one row per variant, and the pass/fail table it prints. Real torch on CPU."""

from __future__ import annotations

import pytest
import torch

import labmagic
from labmagic.benchmark import Race
from labmagic.benchmark.verify import PASS, verify
from labmagic.errors import NoGPUError

pytestmark = pytest.mark.skipif(labmagic.has_gpu(), reason="CPU-mode behaviour (CUDA variants are needs_gpu)")


def torch_add(a, b):
    return a + b


def wrong_when_large(a, b):
    """Right on small inputs, wrong from 16 elements on: the mismatch must name the shape."""
    return a + b if a.numel() < 16 else a - b


def raises(a, b):
    raise ValueError("index out of range on purpose")


def nan_in_one(a, b):
    out = a + b
    out[-1] = float("nan")  # what an unwritten, poisoned element reads as on a GPU
    return out


def cuda_only(a, b):
    raise NoGPUError("needs a CUDA GPU")


def race(**variants):
    return Race(chapter="test_verify", variants={"torch": torch_add, **variants}, ref="torch",
                make_inputs=lambda n: (torch.randn(n), torch.randn(n)), shapes=[64], check_shapes=[3, 31])


def test_each_variant_gets_its_verdict_and_the_shape_it_failed_at():
    result = verify(race(twice=lambda a, b: b + a, wrong=wrong_when_large, broken=raises, poisoned=nan_in_one))
    assert [(r.variant, r.status) for r in result.rows] == [
        ("torch", PASS), ("twice", PASS), ("wrong", "mismatch"), ("broken", "error"), ("poisoned", "mismatch")]
    assert result.shapes == ["3", "31"]
    wrong = result.row("wrong")
    assert wrong.shape == "31" and wrong.err_over_tol > 1 and "at 31:" in wrong.reason
    broken = result.row("broken")
    assert broken.shape == "3" and "ValueError: index out of range on purpose" in broken.reason
    assert result.row("poisoned").shape == "3" and "NaN/inf" in result.row("poisoned").reason
    assert result.row("twice").err_over_tol == 0.0 and result.row("twice").reason == ""
    assert result.failed and result.checked


def test_the_text_table_has_fixed_columns_and_says_needs_gpu_once():
    result = verify(race(gpu_a=cuda_only, gpu_b=cuda_only, wrong=wrong_when_large))
    assert [r.status for r in result.rows] == [PASS, "needs_gpu", "needs_gpu", "mismatch"]
    text = repr(result)
    lines = text.splitlines()
    assert lines[0] == "test_verify: correctness on check shapes 3, 31 (float32) on no GPU"
    assert lines[1] == ("err / tol: the worst |out - ref| / (atol + rtol |ref|) with rtol=0.0001, atol=1e-05; "
                        "pass at or below 1")
    header = next(line for line in lines if line.startswith("variant"))
    rows = {line.split()[0]: line for line in lines if line.split() and line.split()[0] in ("torch", "gpu_a", "wrong")}
    for line in rows.values():  # every row's status starts in the header's status column
        assert line[header.index("status"):].split()[0] in ("pass", "needs", "MISMATCH")
    assert "needs a CUDA GPU" not in text  # the reason is not repeated per row...
    assert text.count("need a GPU") == 1 and "2 variants need a GPU and were not checked here: gpu_a, gpu_b" in text
    assert lines[-1] == "FAILED: 1 pass, 2 needs GPU, 1 MISMATCH"
    html = result._repr_html_()
    assert html.count("<tr") == 5 and 'style="color:#b00"' in html and "at 31:" in html


def test_the_error_column_is_a_fraction_of_the_tolerance_not_a_relative_error():
    """Off by half of atol where the reference is exactly 0: a relative error there is astronomical (chapter 07 showed
    "max rel err 8.35e+03" beside "pass"); as a fraction of the tolerance it is 0.5, and past the tolerance above 1."""
    def make_inputs(n):
        x = torch.randn(n)
        return x, -x  # the reference, x + (-x), is 0 everywhere

    def off_by(amount):
        return lambda a, b: (a + b) + amount

    result = verify(Race(chapter="test_verify", variants={"torch": torch_add, "half": off_by(0.5e-5),
                                                           "over": off_by(1.4e-5)},
                         ref="torch", make_inputs=make_inputs, shapes=[64], check_shapes=[33]))
    half, over = result.row("half"), result.row("over")
    assert half.status == PASS and half.err_over_tol == pytest.approx(0.5, rel=1e-3)
    assert over.status == "mismatch" and over.err_over_tol == pytest.approx(1.4, rel=1e-3)
    assert "worst 1.4x the tolerance" in over.reason
    half_line = next(line for line in repr(result).splitlines() if line.startswith("half "))
    assert half_line.split()[2:4] == ["pass", "0.5"]


def test_all_needs_gpu_is_nothing_checked_not_a_failure():
    result = verify(race(gpu=cuda_only), variants=["gpu"])
    assert [r.variant for r in result.rows] == ["gpu"]
    assert not result.failed and not result.checked
    assert repr(result).splitlines()[-1].startswith("nothing checked (every variant needs a GPU or was skipped)")


def test_shapes_replace_the_check_shapes_and_no_shapes_is_skipped_with_a_note():
    result = verify(race(wrong=wrong_when_large), shapes=[(8,)])
    assert result.shapes == ["8"] and not result.failed
    empty = verify(race(wrong=wrong_when_large), shapes=[])
    assert {r.status for r in empty.rows} == {"skipped"} and not empty.checked
    assert "has no check_shapes: nothing was checked" in repr(empty)


def test_an_unknown_variant_is_one_line():
    with pytest.raises(labmagic.LabError, match=r"unknown variants: nope \(race has torch\)"):
        verify(race(), variants=["nope"])


def test_bench_check_returns_the_verify_table_and_times_nothing(shell, monkeypatch, tmp_path):
    monkeypatch.setenv("LABMAGIC_ROOT", str(tmp_path))
    monkeypatch.setitem(shell.ns, "check_race", race(wrong=wrong_when_large))
    result = shell.run("%bench check_race --check")
    assert type(result).__name__ == "VerifyResult" and result.row("wrong").status == "mismatch"
    assert shell.run("%bench check_race --check --variants torch --shapes 8").shapes == ["8"]
    assert not any(tmp_path.rglob("*.csv"))
    with pytest.raises(labmagic.LabError, match="--check and --no-check contradict"):
        shell.run("%bench check_race --check --no-check")
