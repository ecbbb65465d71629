"""A grade: what the judge concluded about one submission, and what it could not grade.

Statuses, from best to worst:

- ``pass``: correct on every drawn case, no cheat found, and as fast as the bar on this GPU.
- ``correct``: correct and no cheat found; speed not graded (no GPU, or no bar measured for this GPU).
- ``compiled``: CUDA without a GPU: it compiles, spills nothing and contains the instructions the exercise is about;
  correctness and speed not graded.
- ``fail``: a wrong result, too slow, an instruction missing, or an error raised by the submission.
- ``refused``: a known cheat, named (calling torch or another library, returning an input, caching across calls,
  another stream, a copy through the host, writing outside the output).
- ``not_graded``: the judge could not grade it: no such exercise, no marked cell, a cell that does not compile or
  raises, a call that hangs past its time limit, a crashed CUDA context or grading process.

Only ``pass`` is a pass; ``correct`` and ``compiled`` say what is left for a GPU.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

PASS, CORRECT, COMPILED, FAIL, REFUSED, NOT_GRADED = "pass", "correct", "compiled", "fail", "refused", "not_graded"
STATUSES = (PASS, CORRECT, COMPILED, FAIL, REFUSED, NOT_GRADED)
#: Statuses in which nothing that was graded went wrong.
GOOD = (PASS, CORRECT, COMPILED)


@dataclass
class Grade:
    """One submission's grade. ``verdict`` is the one line; ``checks`` what was checked, in order; ``notes`` what
    could not be graded here."""

    exercise: str
    chapter: str = ""
    language: str = ""
    status: str = NOT_GRADED
    verdict: str = ""
    checks: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ms: float | None = None
    bar_ms: float | None = None
    seed: int | None = None
    origin: str = ""
    detail: str = ""

    @property
    def passed(self) -> bool:
        return self.status == PASS

    @property
    def good(self) -> bool:
        """Nothing graded went wrong (``pass``, ``correct`` or ``compiled``)."""
        return self.status in GOOD

    def to_record(self) -> dict:
        return asdict(self)

    @classmethod
    def from_record(cls, record: dict) -> Grade:
        known = {k: record[k] for k in cls.__dataclass_fields__ if k in record}
        grade = cls(**known)
        if grade.status not in STATUSES:
            grade.notes.append(f"the grading process reported an unknown status {grade.status!r}")
            grade.status = NOT_GRADED
        return grade

    def __repr__(self) -> str:
        from ..display.exercise_view import grade_text

        return grade_text(self)

    def _repr_html_(self) -> str:
        from ..display.exercise_view import grade_html

        return grade_html(self)


def not_graded(exercise: str, why: str, **fields) -> Grade:
    """A grade that says, in one line, why nothing could be graded."""
    return Grade(exercise=exercise, status=NOT_GRADED, verdict=why, **fields)
