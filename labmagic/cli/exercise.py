"""``labmagic exercise [CHAPTER [NAME]] [--all] [--solution]``: grade exercises from the command line.

- no arguments: list the chapters' exercises;
- ``CHAPTER``: grade every exercise of the chapter; ``CHAPTER NAME``: one; ``--all``: every chapter's, or with
  ``CHAPTER`` every one of that chapter's, and on a GPU write their grades (a long run can go chapter by chapter);
- the cells come from the chapter's exercise notebook ``book/exercises/<chapter>.ipynb`` (what the reader saved),
  from ``--notebook PATH`` (a copy kept elsewhere), or with ``--solution`` from ``book/solutions/``.

Each submission is graded in a child process (:mod:`labmagic.exercises.judge`): the same judge as ``%exercise``.
With ``--all`` on a GPU the grades are written to ``results/<gpu>/exercises.csv``. Exits 0 when nothing graded went
wrong (every grade ``pass``, or ``correct``/``compiled`` where no GPU could grade the rest), else 1.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import LabError


def add_arguments(parser) -> None:
    parser.add_argument("chapter", nargs="?", help="chapter number, stem or name (01, 01_vector_add, vector_add)")
    parser.add_argument("name", nargs="?", help="one exercise of the chapter (default: all of them)")
    parser.add_argument("--all", action="store_true", help="every exercise (of CHAPTER, when given); on a GPU, write "
                                                           "the grades to results/<gpu>/exercises.csv")
    parser.add_argument("--solution", action="store_true", help="grade the solutions in book/solutions/")
    parser.add_argument("--notebook", type=Path, default=None,
                        help="grade the marked cells of this notebook instead of book/exercises/<chapter>.ipynb")
    parser.add_argument("--seed", type=int, default=None, help="draw the cases with this seed")
    parser.add_argument("--no-speed", action="store_true", help="correctness only: do not time on the GPU")
    parser.add_argument("--no-sanitize", action="store_true", help="skip the compute-sanitizer run of CUDA cells")
    parser.add_argument("--call-timeout", type=float, default=120.0, metavar="SECONDS",
                        help="how long one call may take before it counts as hung (default 120)")


def run(args) -> int:
    from ..exercises import registry

    if not args.chapter and not args.all:
        print(listing())
        return 0
    if args.all and args.name:
        raise LabError("--all grades every exercise (of a chapter, when one is named): name no exercise with it")
    if args.solution and args.notebook:
        raise LabError("--solution and --notebook name two different sources: give one")
    if args.name:
        exercises = [registry.find(args.name, args.chapter)]
    else:
        exercises = registry.in_chapter(args.chapter) if args.chapter else list(registry.all_exercises())
    grades = grade(exercises, args)
    from ..display.exercise_view import summary_table

    for g in grades:
        print(repr(g) + "\n")
    print(summary_table(grades))
    if args.all:
        _write_rows(exercises, grades, "solution" if args.solution else "notebook")
    return 0 if all(g.good for g in grades) else 1


def grade(exercises, args) -> list:
    """Each exercise's submission from its source, graded; a missing cell or file is that exercise's not_graded."""
    from ..exercises import registry, submission
    from ..exercises.judge import JudgeOptions, grade_all
    from ..exercises.verdict import not_graded

    options = JudgeOptions(seed=args.seed, speed=not args.no_speed, sanitize=not args.no_sanitize,
                           call_timeout_s=args.call_timeout)
    found, grades = [], {}
    for i, exercise in enumerate(exercises):
        if args.solution:
            path = registry.solution_path(exercise)
        else:
            path = args.notebook or registry.notebook_path(exercise.chapter)
        try:
            found.append((i, submission.from_notebook(path, exercise.name)))
        except LabError as exc:
            grades[i] = not_graded(exercise.name, str(exc).splitlines()[0], chapter=exercise.chapter,
                                   language=exercise.language)
    for (i, _), result in zip(found, grade_all([s for _, s in found], options)):
        grades[i] = result
    return [grades[i] for i in range(len(exercises))]


def listing() -> str:
    """The chapters' exercises, one line each."""
    from ..exercises import registry
    from ..paths import repo_root

    lines = []
    for chapter in registry.chapters():
        lines.append(f"{chapter}  ({registry.notebook_path(chapter).relative_to(repo_root())})")
        for e in registry.in_chapter(chapter):
            lines.append(f"  {e.name:<22} {e.language:<7} {e.title}")
    lines.append("grade one: labmagic exercise CHAPTER NAME; the solutions: labmagic exercise --all --solution")
    return "\n".join(lines)


def _write_rows(exercises, grades, source: str) -> None:
    from ..benchmark import provenance
    from ..runtime import device_slug, has_gpu
    from ..store.exercise_csv import ExerciseRow, write_exercise_rows

    if not has_gpu():
        print("no GPU: the grades are not written to results/ (only a GPU grades speed)")
        return
    rows = [ExerciseRow(e.chapter, e.name, e.language, source, g.status, g.ms, g.bar_ms, g.seed, g.verdict)
            for e, g in zip(exercises, grades)]
    path = write_exercise_rows(rows, provenance.collect(), device_slug())
    print(f"wrote {len(rows)} rows to {path}")
