"""The book's exercises by name and by chapter, and where their notebooks and solutions live.

Each chapter's exercises are declared in one module of :mod:`labmagic.exercises.sets` (a list ``EXERCISES``);
their statements and stubs are in ``book/exercises/<chapter>.ipynb``, one solution per exercise in
``book/solutions/<chapter>/<name>.ipynb`` (outside the published site and the reader's notebooks).
"""

from __future__ import annotations

import functools
import importlib
from pathlib import Path

from ..errors import LabError
from ..paths import book_dir
from .spec import Exercise

#: One module of :mod:`labmagic.exercises.sets` per chapter, in the book's order.
CATALOG = tuple(f"labmagic.exercises.sets.{name}" for name in (
    "c01_vector_add", "c02_sgemm", "c03_online_softmax", "c04_rmsnorm", "c05_fused_softmax_rmsnorm",
    "c06_tensor_core_gemm", "c07_attention", "c08_int8"))


@functools.cache
def all_exercises() -> tuple[Exercise, ...]:
    """Every exercise, chapter by chapter, each chapter's in rising difficulty."""
    found: list[Exercise] = []
    for module in CATALOG:
        found.extend(importlib.import_module(module).EXERCISES)
    names = [e.name for e in found]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise LabError(f"exercise names must be unique across the book: {', '.join(twice)} appear twice")
    return tuple(found)


def chapters() -> list[str]:
    """The chapters that have exercises (``01_vector_add``, ...), in order."""
    return list(dict.fromkeys(e.chapter for e in all_exercises()))


def chapter_of(name: str) -> str:
    """A chapter by number (``01``), stem (``01_vector_add``) or name (``vector_add``)."""
    known = chapters()
    stem = Path(str(name)).stem
    matches = [c for c in known if stem in (c, c[:2], c[3:])]
    if len(matches) != 1:
        raise LabError(f"no chapter {name!r} has exercises (chapters: {', '.join(known)})")
    return matches[0]


def in_chapter(chapter: str) -> list[Exercise]:
    chapter = chapter_of(chapter)
    return [e for e in all_exercises() if e.chapter == chapter]


def find(name: str, chapter: str | None = None) -> Exercise:
    """The exercise called ``name`` (in ``chapter``, when given); one clear line naming the known ones otherwise."""
    pool = in_chapter(chapter) if chapter else list(all_exercises())
    for exercise in pool:
        if exercise.name == name:
            return exercise
    where = f"chapter {chapter_of(chapter)}" if chapter else "the book"
    raise LabError(f"no exercise {name!r} in {where} (exercises: {', '.join(e.name for e in pool)})")


def notebook_path(chapter: str) -> Path:
    """The chapter's exercise notebook, ``book/exercises/<chapter>.ipynb``."""
    return book_dir() / "exercises" / f"{chapter_of(chapter)}.ipynb"


def solution_path(exercise: Exercise) -> Path:
    """The exercise's solution, ``book/solutions/<chapter>/<name>.ipynb``."""
    return book_dir() / "solutions" / exercise.chapter / f"{exercise.name}.ipynb"
