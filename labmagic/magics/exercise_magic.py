"""``%exercise NAME``: grade the cells of this notebook marked for an exercise.

Thin over :func:`labmagic.exercises.judge.grade_named`: the marked cells (the last run of each, from this
session's history: :func:`labmagic.exercises.submission.from_session`) are graded in a child process, so a kernel
that hangs or crashes the CUDA context costs the child, not this notebook. The grade is returned and shown; it
never raises, whatever the cells do: a wrong name or an unmarked stub is a ``not_graded`` grade that says why.
Limits are settings: ``%config ExerciseMagics.call_timeout_s = 300``.
"""

from __future__ import annotations

from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from traitlets import Float


@magics_class
class ExerciseMagics(Magics):
    call_timeout_s = Float(120.0, config=True, help="Seconds one call of the submission may take before it counts "
                                                    "as hung.")
    build_timeout_s = Float(600.0, config=True, help="Seconds the cells may take to compile.")

    @magic_arguments()
    @argument("name", help="the exercise, as its stub's marker names it (# exercise: NAME)")
    @argument("--seed", type=int, default=None, help="draw the cases with this seed (every grade prints its seed)")
    @argument("--no-speed", action="store_true", help="grade correctness only; do not time on the GPU")
    @argument("--no-sanitize", action="store_true", help="on a GPU, skip the compute-sanitizer run of CUDA cells")
    @line_magic
    def exercise(self, line: str):
        """Grade the marked cells of exercise NAME: correctness on cases drawn now, the known cheats refused, and
        on a GPU the speed against the exercise's bar. Returns the grade."""
        from ..exercises.judge import JudgeOptions, grade_named
        from ..exercises.submission import from_session

        args = parse_argstring(self.exercise, line)
        options = JudgeOptions(seed=args.seed, speed=not args.no_speed, sanitize=not args.no_sanitize,
                               call_timeout_s=self.call_timeout_s, build_timeout_s=self.build_timeout_s)
        return grade_named(args.name, lambda name: from_session(self.shell, name), options)


def register(ipython) -> None:
    ipython.register_magics(ExerciseMagics)
