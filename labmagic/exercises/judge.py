"""The judge's parent side: grade submissions in a child process, with a time limit on every call.

:func:`grade_all` writes the submissions to a jobs file and starts :mod:`.judge_child` on it. It reads the child's
records as they come, and gives every step its own limit from the moment the child announces it: building (the
cells compile: ``build_timeout_s``), each call (``call_timeout_s``), timing (``timing_timeout_s``). A step past its
limit is a hang: the child (its whole process group) is killed, the job is ``not_graded`` with the step that hung,
and a new child takes the jobs left. A child that dies (a crashed CUDA context, a segfault) costs only its job the
same way. The reader's notebook, or the CLI, never runs the submission itself and survives all of this.

On a GPU, CUDA submissions that graded well, or failed on their outputs, then run once more under
compute-sanitizer's memcheck (:mod:`.sanitizer_pass`): a write outside the output that the guard zones did not see
makes the grade ``refused``, named (a far write shows only as a wrong value elsewhere: memcheck names its cause).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..child.protocol import child_env, log_tail
from ..errors import LabError
from ..paths import repo_root
from ..runtime import has_gpu
from .judge_child import CONTEXT_LOST, MARKER, judge_command
from .registry import find
from .submission import Submission
from .verdict import FAIL, Grade, not_graded


@dataclass
class JudgeOptions:
    """How the judge runs its children; the limits are seconds per step."""

    seed: int | None = None
    speed: bool = True
    slug: str | None = None
    sanitize: bool = True
    build_timeout_s: float = 600.0
    call_timeout_s: float = 120.0
    timing_timeout_s: float = 300.0


def grade_named(name: str, find_cells, options: JudgeOptions | None = None) -> Grade:
    """Grade exercise ``name`` on the cells ``find_cells(name)`` returns (a :class:`Submission`): an unknown name or
    no marked cell is a ``not_graded`` grade saying so in one line, never an exception."""
    try:
        exercise = find(name)
        submission = find_cells(exercise.name)
    except LabError as exc:
        return not_graded(str(name), str(exc).splitlines()[0])
    return grade_one(submission, options)


def grade_one(submission: Submission, options: JudgeOptions | None = None) -> Grade:
    """Grade one submission in a child (see :func:`grade_all`)."""
    return grade_all([submission], options)[0]


def grade_all(submissions: list[Submission], options: JudgeOptions | None = None) -> list[Grade]:
    """Grade every submission, in order, in as few children as crashes and hangs allow."""
    options = options or JudgeOptions()
    grades: list[Grade | None] = [None] * len(submissions)
    for i, submission in enumerate(submissions):  # an unknown name needs no child
        try:
            find(submission.exercise)
        except LabError as exc:
            grades[i] = not_graded(submission.exercise, str(exc), origin=submission.origin)
    todo = [i for i, g in enumerate(grades) if g is None]
    if todo:
        with tempfile.TemporaryDirectory(prefix="labmagic-judge-") as tmp:
            jobs = Path(tmp) / "jobs.json"
            jobs.write_text(json.dumps([submissions[i].to_record() for i in todo]), encoding="utf-8")
            for k, grade in enumerate(_run_children(jobs, len(todo), options, tmp)):
                grade.origin = grade.origin or submissions[todo[k]].origin
                grades[todo[k]] = grade
            if options.sanitize and has_gpu():
                from .sanitizer_pass import sanitize

                chosen = [k for k, i in enumerate(todo) if to_sanitize(grades[i])]
                if chosen:
                    sanitize(jobs, chosen, [grades[todo[k]] for k in chosen], tmp)
    return [g for g in grades if g is not None]


def to_sanitize(grade: Grade) -> bool:
    """Whether a CUDA grade runs once more under memcheck: one that graded well (a write the guards did not see
    refuses it), and one that failed on its outputs (``seed`` set: its cases ran), since a write far outside its
    buffers lands in another tensor and shows as a wrong value somewhere: memcheck then names the cause."""
    return grade.language == "cuda" and (grade.good or (grade.status == FAIL and grade.seed is not None))


def _run_children(jobs: Path, count: int, options: JudgeOptions, tmp: str) -> list[Grade]:
    grades: list[Grade] = []
    while len(grades) < count:
        grades.extend(_one_child(jobs, len(grades), options, tmp))
    return grades


def _one_child(jobs: Path, start: int, options: JudgeOptions, tmp: str) -> list[Grade]:
    """Run one child from job ``start``; return the grades it produced, and a ``not_graded`` for the job it hung or
    died in. At least one grade comes back, so the caller always moves on."""
    stderr_path = Path(tmp) / f"child-{start}.stderr"
    with open(stderr_path, "w", encoding="utf-8") as stderr:
        command = judge_command(jobs, start, "grade", options.seed, options.speed, options.slug)
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True, cwd=repo_root(),
                                env=child_env(), start_new_session=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True).start()
    grades: list[Grade] = []
    job, step, limit = start, "starting the grading process", options.build_timeout_s
    deadline = time.monotonic() + limit
    try:
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                _kill(proc)
                grades.append(not_graded(_name(jobs, job), f"{step} did not finish within {limit:.0f} s: a hang (a "
                                                           "loop that never ends, or a kernel that never returns)?"))
                return grades
            if line is None:  # stdout closed: the child exited
                code = proc.wait()
                if step != "between jobs" or not grades:
                    tail = log_tail(stderr_path.read_text(encoding="utf-8", errors="replace"), 15)
                    grades.append(not_graded(_name(jobs, job), f"the grading process {_exit_text(code)} during "
                                                               f"{step}", detail=tail))
                return grades
            record = _record(line)
            if record is None:
                continue
            event = record.get("event")
            if event == "grade":
                grades.append(Grade.from_record(record.get("grade") or {}))
                job, step, limit = int(record.get("job", job)) + 1, "between jobs", options.build_timeout_s
            elif event in ("start", "progress"):
                job = int(record.get("job", job))
                step = str(record.get("what", "building"))
                limit = _limit(step, options)
            deadline = time.monotonic() + limit
    finally:
        if proc.poll() is None:
            _kill(proc)


def _limit(step: str, options: JudgeOptions) -> float:
    if step.startswith("building"):
        return options.build_timeout_s
    if step.startswith("timing"):
        return options.timing_timeout_s
    return options.call_timeout_s


def _pump(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def _record(line: str) -> dict | None:
    idx = line.find(MARKER)
    if idx < 0:
        return None
    try:
        return json.loads(line[idx + len(MARKER):])
    except ValueError:
        return None


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


def _exit_text(code: int) -> str:
    if code == CONTEXT_LOST:
        return "lost its CUDA context"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def _name(jobs: Path, index: int) -> str:
    try:
        return str(json.loads(jobs.read_text(encoding="utf-8"))[index]["exercise"])
    except (ValueError, IndexError, KeyError, OSError):
        return "?"
