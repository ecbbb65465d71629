"""On a GPU: CUDA submissions that graded well, or failed on their outputs, run once more under memcheck.

The guard zones of :mod:`.buffers` see a write just past an output; memcheck sees any access outside any
allocation, read or write, at any distance. All the chosen jobs run in one child (:mod:`.judge_child` with
``--mode sanitize``: one call each at the exercise's odd sanitize shape) under ``compute-sanitizer --tool
memcheck``, with un-pooled allocations (``PYTORCH_NO_CUDA_MEMORY_CACHING``: torch's caching allocator would hide an
access past a tensor inside its block), as ``%sanitize`` runs a chapter's variant. A finding is attributed to the
job whose kernels it names and turns its grade into ``refused``, quoting the cell line (``-lineinfo`` is on for
``%%cuda_kernel``). No compute-sanitizer, or a sanitizer run that could not start, is a note on the grades, never a
pass taken away.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from ..benchmark.sanitizer_check import memcheck_reason
from ..child.protocol import child_env
from ..child.sanitizer_report import attach_sources, parse_output
from ..child.sanitizer_run import UNPOOLED, SanitizeResult, find_sanitizer, sanitizer_command
from ..errors import LabError
from ..paths import repo_root
from .judge_child import MARKER, judge_command
from .verdict import REFUSED, Grade

#: The whole sanitizer run's limit, in seconds (memcheck slows kernels a hundredfold; the shapes are small).
TIMEOUT_S = 900


def sanitize(jobs: Path, chosen: list[int], grades: list[Grade], tmp: str) -> None:
    """Run jobs ``chosen`` (indices into ``jobs``) under memcheck; update their ``grades`` in place."""
    try:
        sanitizer = find_sanitizer()
    except LabError as exc:
        for grade in grades:
            grade.notes.append(f"not sanitized: {str(exc).splitlines()[0]}")
        return
    subset = Path(tmp) / "sanitize.json"
    records = json.loads(jobs.read_text(encoding="utf-8"))
    subset.write_text(json.dumps([records[i] for i in chosen]), encoding="utf-8")
    cmd = sanitizer_command(sanitizer, "memcheck", judge_command(subset, 0, "sanitize"))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=repo_root(),
                              env=child_env(**UNPOOLED))
    except subprocess.TimeoutExpired:
        for grade in grades:
            grade.notes.append(f"not sanitized: compute-sanitizer ran past {TIMEOUT_S} s")
        return
    judge_findings(proc.stdout + "\n" + proc.stderr, _records(proc.stdout), grades)


def judge_findings(log: str, ran: dict[int, dict], grades: list[Grade]) -> None:
    """Turn memcheck's findings in ``log`` into the grades' verdicts: a finding in a job's own kernel refuses it,
    quoting the cell line; ``ran`` holds each job's record from the child (its kernels and their sources)."""
    findings, errors = parse_output(log, "memcheck")
    sources = {k: tuple(v) for r in ran.values() for k, v in (r.get("sources") or {}).items()}
    attach_sources(findings, sources)
    everyone = {name for r in ran.values() for name in (r.get("kernels") or [])}
    untied = [f for f in findings if not (f.kernel and any(name in f.kernel for name in everyone))]
    for k, grade in enumerate(grades):
        record = ran.get(k)
        if record is None:
            grade.notes.append("not sanitized: the submission did not run under compute-sanitizer")
            continue
        own = set(record.get("kernels") or [])
        mine = [f for f in findings if f.kernel and any(name in f.kernel for name in own)]
        if record.get("event") == "error":
            # memcheck aborts a kernel it catches, so the call raises after a finding: the finding still counts
            if not mine:
                grade.notes.append(f"not sanitized: under compute-sanitizer the call raised {record.get('error')}")
                continue
            grade.notes.append(f"under compute-sanitizer the call then raised {record.get('error')}")
        result = SanitizeResult(grade.chapter, grade.exercise, str(record.get("shape", "")), "memcheck", mine,
                                len(mine))
        reason = memcheck_reason(result)
        if reason:
            if grade.status != REFUSED and not grade.good:  # it failed on its outputs: say so beside the cause
                grade.notes.append(f"its outputs were wrong too: {grade.verdict}")
            grade.status = REFUSED
            grade.verdict = f"writes or reads outside its buffers at {result.shape}: {reason}"
        else:
            grade.checks.append(f"compute-sanitizer memcheck at {result.shape}: clean")
    if errors and not any(g.status == REFUSED for g in grades):
        for grade in grades:
            grade.notes.append(f"compute-sanitizer reported {errors} error(s) it did not tie to a kernel"
                               + untied_text(untied))


def untied_text(untied: list) -> str:
    """What the sanitizer's errors outside the submissions' kernels were, as far as its log says: the kinds, each
    with its count and place, the first three (a torch or driver call that failed, a library's kernel)."""
    if not untied:
        return " (its log names none)"
    shown = "; ".join(f"{f.kind} x{f.count}" + (f" in {f.kernel}" if f.kernel else "") for f in untied[:3])
    return f": {shown}" + (f" (+{len(untied) - 3} more kinds)" if len(untied) > 3 else "")


def _records(stdout: str) -> dict[int, dict]:
    """The child's last record per job (``ran`` or ``error``)."""
    found: dict[int, dict] = {}
    for line in stdout.splitlines():
        idx = line.find(MARKER)
        if idx < 0:
            continue
        try:
            record = json.loads(line[idx + len(MARKER):])
        except ValueError:
            continue
        if record.get("event") in ("ran", "error"):
            found[int(record.get("job", -1))] = record
    return found
