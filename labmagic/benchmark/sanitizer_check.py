"""The correctness pass under compute-sanitizer memcheck (``bench(..., sanitize=True)``, ``%bench --sanitize``).

A kernel that writes one element past its output usually passes the check: the stray bytes land in the caching
allocator's slack, not in anything the comparison reads. memcheck sees them only when every tensor has a
``cudaMalloc`` of its own, so each CUDA variant that passed the check runs once more, in a child that replays the
chapter from disk with un-pooled allocations (:func:`labmagic.child.sanitizer_run.sanitize_variant`), at the race's
largest check shape (odd sizes catch guard bugs). A finding makes the variant an ``error`` row that names the kernel
and the cell line, and it is not timed.

Only ``cuda`` variants (``race.backend(name) == "cuda"``) run: memcheck slows a variant a hundredfold, and the
other backends' kernels come from compilers that guard their own bounds (Triton's masks, XLA).
"""

from __future__ import annotations

import math

from ..child.sanitizer_run import SanitizeResult, sanitize_variant
from ..errors import LabError
from ..paths import chapter_path
from ..store.schema import ERROR, OK, shape_str
from .race import Race

#: The backends whose variants run under memcheck.
SANITIZED_BACKENDS = ("cuda",)


def sanitize_checked(race: Race, names: list[str], verdicts: dict[str, tuple[str, str, float | None]],
                     notes: list[str]) -> None:
    """Run every CUDA variant that passed the check under memcheck; turn findings into ``error`` verdicts.

    What stops the pass as a whole (a race that is no chapter on disk, no compute-sanitizer) is a note, never a
    failure: the rows stay as the check left them.
    """
    todo = [n for n in names if n != race.ref and race.backend(n) in SANITIZED_BACKENDS and verdicts[n][0] == OK]
    if not todo:
        return
    try:
        notebook = chapter_path(race.chapter)
    except LabError:
        notes.append(f"sanitize: race {race.chapter!r} is not a chapter notebook in book/ (the child replays the "
                     "chapter from disk): not sanitized")
        return
    shape = shape_str(max(race.check_shapes, key=math.prod)) if race.check_shapes else None
    for name in todo:
        try:
            result = sanitize_variant(str(notebook), name, shape, tool="memcheck")
        except LabError as exc:  # no compute-sanitizer, or it could not start: the same for every variant
            notes.append(f"sanitize: {str(exc).splitlines()[0]}; not sanitized")
            return
        reason = memcheck_reason(result)
        if reason:
            verdicts[name] = (ERROR, reason, verdicts[name][2])
        elif result.child_error:
            notes.append(f"sanitize: {name} did not run in the child ({result.child_error}); not sanitized")


def memcheck_reason(result: SanitizeResult) -> str | None:
    """The row's reason for a result with findings (the first device finding, and how many others); None if clean.

    ``memcheck: Invalid __global__ write of size 4 bytes in vecadd at cell line 5: c[i] = a[i] + b[i]; (+1 more)``
    """
    device = [f for f in result.findings if f.severity == "error"] or list(result.findings)
    if not device:
        return f"memcheck: {result.errors} errors reported, none parsed (run %sanitize)" if result.errors else None
    first = device[0]
    text = f"{result.tool}: {first.kind} in {first.kernel or '?'}"
    if first.line is not None:
        text += f" at cell line {first.line}"
        if first.source_line:
            text += f": {first.source_line.strip()}"
    else:
        text += " (no line info: compile with -lineinfo)"
    return text + (f" (+{len(device) - 1} more)" if len(device) > 1 else "")
