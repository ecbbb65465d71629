"""The judge on a GPU: every solution passes its speed bar, every stub fails, and the cheats only a GPU can see are
refused (another stream, a hidden kernel, a device copy, work skipped once timed, a write far outside the output);
a crashed CUDA context costs only its own grade."""

from __future__ import annotations

import pytest
from planted_submissions import CRASH, GPU_CHEATS, SCALE_ADD_KERNEL, scale_add

from labmagic.exercises import registry
from labmagic.exercises.bars import bar_value
from labmagic.exercises.judge import JudgeOptions, grade_all
from labmagic.exercises.submission import Submission, from_notebook
from labmagic.runtime import device_slug

pytestmark = pytest.mark.gpu


def test_every_solution_passes_its_bar():
    exercises = list(registry.all_exercises())
    slug = device_slug()
    unbarred = [e.name for e in exercises if bar_value(e, slug) is None]
    if unbarred:
        pytest.skip(f"no speed bar on {slug} for {len(unbarred)} of {len(exercises)} exercises ({', '.join(unbarred[:3])}"
                    f"{', ...' if len(unbarred) > 3 else ''}): the bars come from results/{slug}/ceilings.json "
                    "(labmagic calibrate) and the chapters' rows there")
    subs = [from_notebook(registry.solution_path(e), e.name) for e in exercises]
    grades = grade_all(subs)
    report = "\n".join(f"{g.exercise}: {g.status}: {g.verdict}" for g in grades)
    assert [g.status for g in grades] == ["pass"] * len(exercises), report
    assert all(g.ms is not None and g.bar_ms is not None and g.ms <= g.bar_ms for g in grades), report


def test_every_stub_fails():
    exercises = list(registry.all_exercises())
    subs = [from_notebook(registry.notebook_path(e.chapter), e.name) for e in exercises]
    grades = grade_all(subs, JudgeOptions(speed=False, sanitize=False))
    report = "\n".join(f"{g.exercise}: {g.status}: {g.verdict}" for g in grades)
    assert [g.status for g in grades] == ["fail"] * len(exercises), report


# "writes far outside its output" was graded 'fail' on GPUs until 1b88b47 (memcheck aborts the kernel it catches and
# the judge read the aborted job's record as "not sanitized"); refused on an H100 at 80f03d9.
@pytest.mark.parametrize("name", sorted(GPU_CHEATS))
def test_a_gpu_cheat_is_refused_and_named(name):
    exercise, cells, status, phrase = GPU_CHEATS[name]
    (grade,) = grade_all([Submission(exercise, cells, name)])
    assert grade.status == status, f"{grade.status}: {grade.verdict} (notes: {grade.notes})"
    assert phrase in grade.verdict, grade.verdict


def test_a_crashed_context_costs_only_its_own_grade():
    exercise, cells, status, phrase = CRASH
    right = Submission("scale_add", scale_add("def scale_add(x, y, alpha, out):\n    k[(triton.cdiv(x.numel(), 256),)]"
                                              "(x, y, out, alpha, x.numel(), BLOCK=256)\n", SCALE_ADD_KERNEL), "right")
    crashed, after = grade_all([Submission(exercise, cells, "crash"), right], JudgeOptions(speed=False))
    assert crashed.status == status and phrase in crashed.verdict, crashed.verdict
    assert after.status == "correct", after.verdict
