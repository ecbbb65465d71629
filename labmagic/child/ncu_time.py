"""The child side of ``%bench --nsight``: call each (variant, shape) of a list of jobs under Nsight Compute, each call
between two marker kernels, so the parent can tell which profiled kernels belong to which call.

    ncu --profile-from-start off --metrics gpu__time_duration.sum --csv ... \\
        python -m labmagic.child --chapter 01 --mode nsight-time --jobs jobs.json --iters 10

For every job, in the order of the jobs file: build one input set, warm up outside the profiled range (compiles,
module loads, autotuning), then inside ``cudaProfilerStart/Stop``: a marker, a call, a synchronize, ``--iters`` times,
and one closing marker. The marker is ``torch.cuda._sleep(1)``, one launch of PyTorch's ``spin_kernel``
(:data:`MARKER_KERNEL`), a kernel no variant launches, so in ncu's launch-ordered rows the kernels between two
markers are exactly one call's (a JAX variant's too: the synchronize waits for JAX's own streams before the next
marker is launched). The parent (:mod:`labmagic.benchmark.ncu_check`) re-reads that layout from the record this
returns: per job, how many markers and calls it launched, or the error that stopped it. ``%ncu`` of several variants
(:func:`labmagic.child.ncu_run.profile_variants`) runs the same mode under a full section set, so that one replay
of the chapter serves every variant of the cell; :func:`split_calls` gives each job its kernels back.

A job may leave out its shape: it then runs at the race's largest (what ``%ncu`` profiles by default, and what only
the chapter knows). Each job's entry carries its shape as run and the race's predicted bytes and FLOPs there.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..errors import LabError
from ..store.schema import shape_dims, shape_str
from ..timing import block_until_ready
from .ncu_report import KernelProfile
from .replay import variant_and_inputs

#: Name (a substring of ncu's "Kernel Name") of the kernel that ``torch.cuda._sleep`` launches: the call separator.
MARKER_KERNEL = "spin_kernel"

#: ``python -m labmagic.child --mode`` value of this mode.
MODE = "nsight-time"


def write_jobs(path: Path | str, jobs) -> Path:
    """The jobs file the child reads: ``[{"variant": "cuda_float4", "shape": "4096x4096"}, ...]``; a shape of None
    is left out (the race's largest)."""
    path = Path(path)
    path.write_text(json.dumps([{"variant": v} if s is None else
                                {"variant": v, "shape": s if isinstance(s, str) else shape_str(s)}
                                for v, s in jobs]))
    return path


def read_jobs(path: Path | str) -> list[tuple[str, tuple[int, ...] | None]]:
    """(variant, shape) of each job in a jobs file, in its order (shape None where the job names none: the race's
    largest); a :class:`LabError` naming the first bad entry."""
    if not path:
        raise LabError(f"--mode {MODE} needs --jobs FILE (a JSON list of {{'variant': ..., 'shape': ...}})")
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise LabError(f"--jobs {path}: cannot read a JSON list of jobs ({type(exc).__name__}: {exc})") from exc
    if not isinstance(raw, list) or not raw:
        raise LabError(f"--jobs {path}: expected a non-empty JSON list of {{'variant': ..., 'shape': ...}}")
    jobs = []
    for i, item in enumerate(raw):
        variant = item.get("variant") if isinstance(item, dict) else None
        shape = item.get("shape") if isinstance(item, dict) else None
        dims = shape_dims(shape) if isinstance(shape, str) else []
        if not isinstance(variant, str) or not variant or (shape is not None and (not dims or min(dims) <= 0)):
            raise LabError(f"--jobs {path}: job {i} is {item!r}; expected {{'variant': NAME, 'shape': '4096x4096'}}"
                           " (or no shape: the race's largest)")
        jobs.append((variant, tuple(dims) if shape is not None else None))
    return jobs


def is_marker(kernel: KernelProfile) -> bool:
    return MARKER_KERNEL in kernel.name


def split_calls(kernels: list[KernelProfile], jobs: list[dict]) -> list[list[list[KernelProfile]]]:
    """Per job of the child's record, its calls, each the kernels launched between two of its markers.

    ``jobs`` are the record's entries in order, each with the ``markers`` it launched (``calls + 1`` when it
    finished); kernels outside every job's markers (none, when profiling started and stopped around them) are left
    out. A marker count that differs from the record's is a :class:`LabError`: attribution would be guesswork.
    """
    ordered = sorted(kernels, key=lambda k: k.id)
    at = [i for i, k in enumerate(ordered) if is_marker(k)]
    expected = sum(int(job.get("markers", 0)) for job in jobs)
    if len(at) != expected:
        raise LabError(f"ncu profiled {len(at)} marker kernels ({MARKER_KERNEL}) where the child launched {expected}: "
                       "cannot tell which kernels belong to which call")
    out, used = [], 0
    for job in jobs:
        mine = at[used:used + int(job.get("markers", 0))]
        used += len(mine)
        out.append([ordered[a + 1:b] for a, b in zip(mine, mine[1:])])
    return out


def _cuda():
    """torch when it sees a GPU, else None (the mode then runs the calls without markers or profiler range)."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def _synchronize(out, torch) -> None:
    block_until_ready(out)  # JAX's work runs on its own streams
    if torch is not None:
        torch.cuda.synchronize()


def _mark(torch) -> int:
    """Launch one marker kernel and wait for it; 1 if launched, 0 without a GPU."""
    if torch is None:
        return 0
    torch.cuda._sleep(1)
    torch.cuda.synchronize()
    return 1


def time_job(race, variant: str, shape: tuple[int, ...], iters: int, warmup: int, entry: dict) -> None:
    """One job: warm-up outside the profiled range, then ``iters`` marked calls; counts go into ``entry`` as they
    happen, so a job that fails half-way still tells the parent how many markers it launched."""
    fn, inputs = variant_and_inputs(race, variant, shape)
    torch = _cuda()
    for _ in range(warmup):
        _synchronize(fn(*inputs), torch)
    if torch is not None:
        torch.cuda.profiler.start()
    try:
        for _ in range(iters):
            entry["markers"] += _mark(torch)
            _synchronize(fn(*inputs), torch)
            entry["calls"] += 1
        entry["markers"] += _mark(torch)
    finally:
        if torch is not None:
            torch.cuda.profiler.stop()


def largest_shape(race) -> tuple[int, ...]:
    """The race's largest shape (by element count): what a job without a shape runs, as ``%ncu`` does."""
    if not race.shapes:
        raise LabError("the job names no shape and the race declares none")
    return tuple(max(race.shapes, key=math.prod))


def predicted(race, shape: tuple[int, ...]) -> dict[str, float | None]:
    """The race's predicted bytes and FLOPs per call at ``shape`` (None where it predicts none)."""
    flops, nbytes = getattr(race, "flops", None), getattr(race, "nbytes", None)
    return {"flops": float(flops(*shape)) if flops else None, "nbytes": float(nbytes(*shape)) if nbytes else None}


def time_jobs(race, jobs: list[tuple[str, tuple[int, ...] | None]], iters: int, warmup: int) -> dict:
    """Run every job in order (see the module docstring); the record for the parent. A job that raises is an
    ``error`` in its entry, and the next job runs."""
    if iters < 1:
        raise LabError(f"--iters must be at least 1 for --mode {MODE}, not {iters}")
    record: dict = {"chapter": race.chapter, "mode": MODE, "iters": iters, "marker": MARKER_KERNEL, "jobs": []}
    for variant, shape in jobs:
        entry = {"variant": variant, "shape": "", "markers": 0, "calls": 0}
        record["jobs"].append(entry)
        try:
            shape = shape or largest_shape(race)
            entry.update(shape=shape_str(shape), **predicted(race, shape))
            time_job(race, variant, shape, iters, warmup, entry)
        except Exception as exc:  # noqa: BLE001 - one job's failure is its entry's error, not the end of the list
            lines = str(exc).strip().splitlines()
            entry["error"] = f"{type(exc).__name__}: {lines[0] if lines else ''}"
    return record
