"""The grading process: ``python -m labmagic.exercises.judge_child --jobs FILE``.

The judge never runs a reader's code in its own process (a notebook's kernel, the CLI): a kernel that faults takes
the CUDA context with it, and one that never ends takes the process. This child runs the jobs of ``FILE`` (a JSON
list of submissions, :meth:`labmagic.exercises.submission.Submission.to_record`) from ``--start`` on, one after the
other in one IPython shell with labmagic loaded, each in a fresh namespace, and reports on stdout, one JSON record
a line after :data:`MARKER`:

- ``{"event": "progress", "job": i, "what": "case 2 of 5 (31x17)"}`` before every call, so the parent can give each
  call its own time limit and say which one hung;
- ``{"event": "grade", "job": i, "grade": {...}}`` when job ``i`` is graded;
- with ``--mode sanitize`` (under compute-sanitizer): ``{"event": "ran", "job": i, "sources": ..., "kernels": ...}``
  after one call of each job, or ``{"event": "error", "job": i, "error": ...}``, with the kernels and sources too
  when the job built before it raised (memcheck aborts a kernel it catches: the call then raises).

After a job that crashed the CUDA context the child reports it and exits with :data:`CONTEXT_LOST`; the parent
starts a new child for the jobs left.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback

#: Prefix of the child's record lines.
MARKER = "LABMAGIC-EXERCISE "
#: Exit status after a job crashed the CUDA context (the rest need a new process).
CONTEXT_LOST = 3


def judge_command(jobs, start: int = 0, mode: str = "grade", seed: int | None = None, speed: bool = True,
                  slug: str | None = None) -> list[str]:
    """The command line that starts this child on ``jobs`` from job ``start``."""
    cmd = [sys.executable, "-m", "labmagic.exercises.judge_child", "--jobs", str(jobs), "--start", str(start),
           "--mode", mode]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    if not speed:
        cmd.append("--no-speed")
    if slug:
        cmd += ["--slug", slug]
    return cmd


def emit(record: dict) -> None:
    sys.stdout.flush()
    print(MARKER + json.dumps(record, default=str), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labmagic.exercises.judge_child",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", required=True, help="JSON file: a list of submissions")
    parser.add_argument("--start", type=int, default=0, help="the first job to run")
    parser.add_argument("--mode", choices=("grade", "sanitize"), default="grade")
    parser.add_argument("--seed", type=int, default=None, help="draw the cases with this seed")
    parser.add_argument("--no-speed", action="store_true", help="do not time (correctness only)")
    parser.add_argument("--slug", default=None, help="the GPU whose bar applies (default: this one)")
    args = parser.parse_args(argv)

    with open(args.jobs, encoding="utf-8") as handle:
        jobs = json.load(handle)
    from IPython.core.interactiveshell import InteractiveShell

    from ..errors import LabError
    from .grading import ContextLost, Options, grade, prepare_once
    from .registry import find
    from .submission import Submission
    from .verdict import not_graded

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "labmagic")
    for index in range(args.start, len(jobs)):
        submission = Submission.from_record(jobs[index])
        try:
            exercise = find(submission.exercise)
        except LabError as exc:
            emit({"event": "grade", "job": index, "grade": not_graded(submission.exercise, str(exc)).to_record()})
            continue
        if args.mode == "sanitize":
            emit({"event": "start", "job": index})
            built: dict = {}
            try:
                call, built = prepare_once(exercise, submission, shell)
                call()
                emit({"event": "ran", "job": index, **built})
            except BaseException as exc:  # noqa: BLE001 - the sanitizer's report is what matters here
                emit({"event": "error", "job": index, "error": f"{type(exc).__name__}: {exc}", **built})
                if _sticky(exc):
                    return CONTEXT_LOST
            continue
        options = Options(seed=args.seed, speed=not args.no_speed, slug=args.slug,
                          progress=lambda what, i=index: emit({"event": "progress", "job": i, "what": what}))
        emit({"event": "start", "job": index})
        try:
            result = grade(exercise, submission, shell, options)
        except ContextLost as lost:
            emit({"event": "grade", "job": index, "grade": lost.grade.to_record()})
            return CONTEXT_LOST
        except BaseException:  # noqa: BLE001 - the parent turns a silent death into not_graded; say why first
            traceback.print_exc()
            raise
        emit({"event": "grade", "job": index, "grade": result.to_record()})
        _release()
    return 0


def _sticky(exc: BaseException) -> bool:
    from ..compiler import faults

    return faults.is_sticky(exc)


def _release() -> None:
    """Give the GPU memory of the job back before the next one."""
    import gc

    gc.collect()
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.empty_cache()


if __name__ == "__main__":
    sys.exit(main())
