"""Bad input to a race: names that would be paths, inputs that cannot be made, nothing to time or to check,
and outputs left on the wrong device. Each is a one-line LabError or a row that says so, never a traceback or a
silently wrong table. Real ``bench`` with the wall-clock timer on CPU, as in test_bench.py."""

from __future__ import annotations

import pytest
import torch

import labmagic
from labmagic.benchmark import BenchResult, Race, bench, checks
from labmagic.store.bench_csv import bench_csv_path
from labmagic.timing import WallTimer

pytestmark = pytest.mark.skipif(labmagic.has_gpu(), reason="CPU-mode behaviour; the GPU path is in test_bench_gpu")


def make_inputs(n):
    return torch.randn(n), torch.randn(n)


def torch_add(a, b):
    return a + b


def torch_wrong(a, b):
    return a - b


def race(**kw):
    fields = dict(chapter="test_guards", variants={"torch": torch_add, "torch_wrong": torch_wrong}, ref="torch",
                  make_inputs=make_inputs, shapes=[8, 16], check_shapes=[3, 5])
    return Race(**{**fields, **kw})


def files_under(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


# -- names that become paths ------------------------------------------------------------------------

@pytest.mark.parametrize("chapter", ["../../../escaped", "/tmp/escaped", "01_vector_add/../../x", "..", "",
                                     "01 vector add", "01_Vector_Add", "01_vector_add.csv"])
def test_a_chapter_name_that_is_not_a_plain_name_is_refused(chapter):
    with pytest.raises(labmagic.LabError, match="is not a chapter name"):
        race(chapter=chapter)
    with pytest.raises(labmagic.LabError, match="is not a chapter name"):
        bench_csv_path(chapter)


def test_chapter_names_of_the_book_and_of_tests_are_accepted():
    for chapter in ("01_vector_add", "05_fused_softmax_rmsnorm", "99_tiny", "test_race", "timer_agreement", "x"):
        assert race(chapter=chapter).chapter == chapter
        assert bench_csv_path(chapter, "cpu").name == f"{chapter}.csv"


@pytest.mark.parametrize("variant", ["../x", "a/b", "", "2fast", "cuda float4", "cuda-float4"])
def test_a_variant_name_that_is_not_identifier_like_is_refused(variant):
    with pytest.raises(labmagic.LabError, match="is not a variant name"):
        race(variants={"torch": torch_add, variant: torch_add})


def test_saving_never_writes_outside_results(tmp_path, monkeypatch):
    root = tmp_path / "root"
    monkeypatch.setenv("LABMAGIC_ROOT", str(root))
    sneaky = race()
    sneaky.chapter = "../../../escaped"  # a dataclass field can be changed after the checks in __post_init__
    with pytest.raises(labmagic.LabError, match="is not a chapter name"):
        bench(sneaky, timer=WallTimer(reps=2), plot=False, save=True)
    assert files_under(tmp_path) == []  # no CSV, no .lock, no PNG, anywhere


# -- inputs that cannot be made ---------------------------------------------------------------------

def fussy_inputs(n):
    if n == 5:
        raise ValueError("no inputs of length 5")
    return make_inputs(n)


def test_make_inputs_raising_is_an_error_row_in_the_check_and_in_timing():
    variants = {"torch": torch_add, "torch_too": torch_add, "torch_wrong": torch_wrong}
    checked = bench(race(variants=variants, make_inputs=fussy_inputs, check_shapes=[3, 5]), timer=WallTimer(reps=2),
                    plot=False)
    assert checked.row("torch_wrong", 8).status == "mismatch"  # found wrong at 3, before the inputs at 5 failed
    for name in ("torch", "torch_too"):
        for shape in (8, 16):
            row = checked.row(name, shape)
            assert row.status == "error" and row.ms_median is None
            assert row.error == "making inputs at 5: ValueError: no inputs of length 5"
    timed = bench(race(make_inputs=fussy_inputs, shapes=[5, 8], check_shapes=[3]), timer=WallTimer(reps=2),
                  plot=False)
    assert timed.row("torch", 5).status == "error" and "no inputs of length 5" in timed.row("torch", 5).error
    assert timed.row("torch", 8).status == "ok"  # the sweep went on to the next shape


# -- nothing to time, nothing to check --------------------------------------------------------------

def test_no_shapes_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.setenv("LABMAGIC_ROOT", str(tmp_path))
    with pytest.raises(labmagic.LabError, match="'test_guards' has no shapes to time"):
        bench(race(shapes=[]), timer=WallTimer(reps=2), plot=False, save=True)
    with pytest.raises(labmagic.LabError, match="has no shapes to time"):
        bench(race(), shapes=[], timer=WallTimer(reps=2), plot=False, save=True)
    empty = BenchResult("test_guards", [], True, "cpu", None, None)
    with pytest.raises(labmagic.LabError, match="no rows to save"):
        empty.save()
    assert files_under(tmp_path) == []


def test_no_check_shapes_warns_and_claims_no_error_bound():
    predicted = bench(race(check_shapes=[]))
    assert any("no check_shapes: nothing was checked" in note for note in predicted.notes)
    assert "nothing was checked" in repr(predicted)
    for name in ("torch", "torch_wrong"):
        assert predicted.row(name, 8).err_over_tol is None  # not 0.0: nothing was compared
    timed = bench(race(check_shapes=[]), timer=WallTimer(reps=2), plot=False)
    assert any("nothing was checked" in note for note in timed.notes)
    wrong = timed.row("torch_wrong", 8)
    assert wrong.status == "mismatch" and wrong.err_over_tol is None


def test_without_check_nothing_is_claimed_and_nothing_is_warned():
    result = bench(race(check_shapes=[]), check=False)
    assert not any("nothing was checked" in note for note in result.notes)
    assert result.row("torch_wrong", 8).status == "predicted" and result.row("torch_wrong", 8).err_over_tol is None


# -- outputs on the wrong device --------------------------------------------------------------------

@pytest.mark.parametrize("out, ref, misplaced", [
    ("cpu", "cuda", True), ("cpu", "cuda:1", True), ("cuda", "cuda", False), ("cuda:0", "cuda:0", False),
    ("cpu", "cpu", False), ("cuda", "cpu", False),
])
def test_an_output_on_the_host_against_a_device_reference_is_misplaced(out, ref, misplaced):
    reason = checks.placement_problem(out, ref)
    assert bool(reason) is misplaced
    if misplaced:
        assert "on the host" in reason and ref in reason


def test_compare_refuses_a_host_output_against_a_reference_off_the_host():
    # torch's "meta" device stands in for a GPU here: not the host, and present on every machine.
    result = checks.compare(torch.ones(2), torch.ones(2, device="meta"), 1e-4, 1e-5)
    assert not result and "on the host (cpu) but the reference's is on meta" in result.reason


def test_a_cpu_run_with_both_outputs_on_the_host_compares_values():
    ref = torch.tensor([1.0, 2.0])
    assert checks.compare(ref.clone(), ref, 1e-4, 1e-5)
    assert "differ" in checks.compare(ref + 1, ref, 1e-4, 1e-5).reason


def test_a_failing_flops_or_bytes_formula_is_an_error_row_for_that_shape():
    def nbytes(n):
        if n == 16:
            raise ZeroDivisionError("division by zero")
        return 12.0 * n

    result = bench(race(nbytes=nbytes), timer=WallTimer(reps=2), save=False, plot=False)
    assert result.row("torch", 8).status == "ok" and result.row("torch", 8).nbytes == 96.0
    row = result.row("torch", 16)
    assert row.status == "error" and "flops/nbytes at 16: ZeroDivisionError" in row.error
    assert row.ms_median is None


# -- two races writing one row ----------------------------------------------------------------------

def test_two_races_timing_other_code_under_one_name_and_shape_are_refused_before_anything_runs(shell):
    """Chapter 09's prefill race once called its reference by its decode race's name at the same shape: the later
    write replaced the earlier row in the CSV. In a session, bench refuses it by naming the other race and the rows;
    the same callables narrowed into a second race (dataclasses.replace) are one measurement and pass."""
    shell.ns.update(Race=Race, bench=bench, WallTimer=WallTimer, make_inputs=make_inputs, torch_add=torch_add)
    shell.run("def other_add(a, b):\n    return b + a\n"
              "race_a = Race(chapter='test_guards', variants={'torch': torch_add}, ref='torch', "
              "make_inputs=make_inputs, shapes=[8, 16], check_shapes=[3])\n"
              "race_b = Race(chapter='test_guards', variants={'torch': other_add}, ref='torch', "
              "make_inputs=make_inputs, shapes=[16, 32], check_shapes=[3])")
    with pytest.raises(labmagic.LabError, match=r"race_a times other code .*torch at 16, float32"):
        shell.run("bench(race_b, timer=WallTimer(), save=False)")
    shell.run("import dataclasses\nrace_b = dataclasses.replace(race_a, shapes=[16])")
    assert shell.run("bench(race_b, timer=WallTimer(), save=False)").rows[0].status == "ok"
    shell.run("del race_a, race_b")
