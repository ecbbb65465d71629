"""The judge, end to end on this machine: every solution passes what a CPU can grade, every stub fails, every planted
cheat is refused and named, every bad input is "not graded" with its reason, and the process that grades survives
none of it being its caller's problem.

All submissions go through :func:`labmagic.exercises.judge.grade_all` (a real child process, real NVRTC, Triton's
interpreter), in two batches run side by side: one child per batch, plus one for each planted hang or death.
"""

from __future__ import annotations

import threading

import pytest
from planted_submissions import BAD_INPUT, CPU_CHEATS

from labmagic.exercises import registry
from labmagic.exercises.judge import JudgeOptions, grade_all
from labmagic.exercises.submission import Submission, from_notebook

#: A hang must be cut short: this is its limit per call, in seconds. Not shorter: on CI's two cores, shared by the
#: two batches' children, the first call of the first exercise (scale_add, n = 1, the process's first Triton
#: interpreter launch) once took over 4 s, and both batches reported a correct solution and a stub as hangs.
HANG_LIMIT_S = 20.0


def _grade_in_parallel(batches: list[list[Submission]], options: JudgeOptions) -> list[list]:
    results: list = [None] * len(batches)

    def run(i):
        results[i] = grade_all(batches[i], options)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(batches))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


@pytest.fixture(scope="module")
def graded():
    """Every solution, every stub, every planted cheat and bad input, graded once for the module's tests."""
    exercises = list(registry.all_exercises())
    solutions = [from_notebook(registry.solution_path(e), e.name) for e in exercises]
    stubs = [from_notebook(registry.notebook_path(e.chapter), e.name) for e in exercises]
    planted = {**CPU_CHEATS, **BAD_INPUT}
    cheats = [Submission(ex, cells, name) for name, (ex, cells, _, _) in planted.items()]
    options = JudgeOptions(call_timeout_s=HANG_LIMIT_S, seed=20261204)
    first, second = _grade_in_parallel([solutions + cheats[: len(cheats) // 2], stubs + cheats[len(cheats) // 2:]],
                                       options)
    n = len(exercises)
    by_cheat = dict(zip(planted, first[n:] + second[n:]))
    return {"exercises": exercises, "solutions": first[:n], "stubs": second[:n], "cheats": by_cheat}


def test_there_are_at_least_twenty_exercises_two_to_four_per_chapter():
    exercises = registry.all_exercises()
    assert len(exercises) >= 20
    per_chapter = {c: len(registry.in_chapter(c)) for c in registry.chapters()}
    assert sorted(c[:2] for c in per_chapter) == [f"{i:02d}" for i in range(1, 9)]
    assert all(2 <= n <= 4 for n in per_chapter.values()), per_chapter


def test_every_solution_passes_what_this_machine_can_grade(graded):
    report = "\n".join(f"{g.exercise}: {g.status}: {g.verdict}" for g in graded["solutions"])
    for exercise, grade in zip(graded["exercises"], graded["solutions"]):
        # Triton is graded for correctness in the interpreter; CUDA compiles and its SASS is checked.
        expected = "correct" if exercise.language == "triton" else "compiled"
        assert grade.status == expected, report
        assert grade.notes, report  # it says what it could not grade here


def test_every_stub_fails(graded):
    report = "\n".join(f"{g.exercise}: {g.status}: {g.verdict}" for g in graded["stubs"])
    for exercise, grade in zip(graded["exercises"], graded["stubs"]):
        if exercise.name == "wgmma_desc":
            # Its stub is the given harness with an incomplete descriptor: it compiles to wgmma like the solution,
            # and only running it tells them apart (tests/exercises/test_exercise_judge_gpu.py does, on a GPU).
            assert grade.status == "compiled", report
        else:
            assert grade.status == "fail", report


@pytest.mark.parametrize("name", sorted({**CPU_CHEATS, **BAD_INPUT}))
def test_a_planted_submission_gets_its_status_and_reason(graded, name):
    _, _, status, phrase = {**CPU_CHEATS, **BAD_INPUT}[name]
    grade = graded["cheats"][name]
    assert grade.status == status, f"{grade.status}: {grade.verdict}"
    assert phrase in grade.verdict, grade.verdict
    assert "\n" not in grade.verdict  # one line


def test_a_grade_names_the_seed_that_drew_its_cases(graded):
    grade = graded["cheats"]["calls torch"]
    assert grade.seed == 20261204 and "--seed 20261204" in repr(grade)
