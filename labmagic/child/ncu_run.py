"""Nsight Compute for one variant of a chapter's race: run it, keep the report, summarise it.

``ncu`` must launch the process it profiles and writes its report when that process exits, so the
variant is rebuilt in a child (:mod:`labmagic.child`, replaying the chapter notebook) under

    ncu --set full --clock-control none --profile-from-start off -f -o results/<gpu>/profiles/<chapter>/<variant> \
        python -m labmagic.child --chapter ... --variant ... --shape ... --mode ncu

``--profile-from-start off`` with the child's ``cudaProfilerStart/Stop`` around the timed calls means
only the variant's own kernels are profiled: not input creation, not warm-up, not Triton's or JAX's
compilation. ``--clock-control none`` keeps the GPU's normal boost clocks, which is what ``%bench``
measures (ncu's default locks the base clock and makes kernels look slower than they run).

``%ncu`` of several variants (:func:`profile_variants`) profiles them all in one child, replaying the chapter once
instead of once per variant (it saves the start-ups, 10-23% of a cell: ncu's replay is what a profile costs; the
measurements are in book/methods/profiling.md): the child runs
``--mode nsight-time`` (:mod:`labmagic.child.ncu_time`), each variant's calls between marker kernels, under the same
``ncu --set full``; one report holds every variant's kernels (``<v1>-<v2>.<race>.<shape>.ncu-rep``) and each variant
gets its own summary and raw page, split at the markers.

The saved ``.ncu-rep`` opens in the Nsight Compute GUI; the summary comes from
``ncu --import REPORT --csv --page raw --print-units base`` (one row per kernel, one column per
metric), parsed by :mod:`labmagic.child.ncu_report`. Beside the report go the summary (``.csv``) and
the whole raw page in display units (``.raw.csv``), small enough to commit where the report is not.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import re
import subprocess
import tempfile
from pathlib import Path

from ..errors import LabError
from ..paths import chapter_path, check_chapter_name, check_race_name, check_variant_name, repo_root, results_dir
from ..runtime import require_gpu
from ..tools import find_nsight_tool
from .ncu_report import KernelProfile, diagnose, parse_raw_csv, summary_rows
from .ncu_time import MODE as JOBS_MODE
from .ncu_time import split_calls, write_jobs
from .protocol import child_command, child_env, child_record, log_tail, parse_shape

#: A shape in a report's name: the CSV's shape key (``4096x4096``), digits and ``x`` only.
SHAPE_NAME = re.compile(r"[0-9]+(x[0-9]+)*")


class ProfilerError(LabError, RuntimeError):
    """ncu ran but produced no usable report (``results``: what it did profile of the variants asked for)."""

    results: list = []


# --- finding the tools ----------------------------------------------------------------------------

def find_ncu() -> str:
    return find_nsight_tool("ncu", "LABMAGIC_NCU")


# --- running ---------------------------------------------------------------------------------------

@dataclasses.dataclass
class ProfileResult:
    """The kernels one variant launched (per call) and where the full report is."""

    chapter: str
    variant: str
    shape: str
    report: Path | None
    kernels: list[KernelProfile]
    iters: int = 1
    nbytes: float | None = None  # the race's predicted bytes per call
    flops: float | None = None
    command: list[str] = dataclasses.field(default_factory=list)

    @property
    def dram_bytes(self) -> float | None:
        """DRAM bytes read + written per call, summed over the variant's kernels."""
        values = [(k.dram_read or 0) + (k.dram_write or 0) for k in self.kernels
                  if k.dram_read is not None or k.dram_write is not None]
        return sum(values) / max(self.iters, 1) if values else None

    @property
    def duration_s(self) -> float | None:
        values = [k.duration_s for k in self.kernels if k.duration_s is not None]
        return sum(values) / max(self.iters, 1) if values else None

    def _repr_html_(self) -> str:
        from ..display.profile_view import profile_html

        return profile_html(self)

    def __repr__(self) -> str:
        from ..display.profile_view import profile_text

        return profile_text(self)


def report_path(chapter: str, variant: str, slug: str | None = None, *, race: str | None = None,
                shape: str | None = None) -> Path:
    """``results/<gpu>/profiles/<chapter>/<variant>[.<race>][.<shape>]`` (ncu adds ``.ncu-rep``): one file per
    variant, race and shape, so profiling a variant at a second shape, or in a second race, keeps the first report.
    Every part is checked, since a ``..`` or ``/`` in one would put the report outside ``results/``."""
    stem = check_variant_name(variant)
    if race is not None:
        stem += f".{check_race_name(race)}"
    if shape is not None:
        if not SHAPE_NAME.fullmatch(str(shape)):
            raise LabError(f"shape {shape!r} is not a shape name like 4096x4096 (it names a report under results/)")
        stem += f".{shape}"
    return results_dir(slug) / "profiles" / check_chapter_name(chapter) / stem


def _with_suffix(stem: Path, suffix: str) -> Path:
    """``stem`` + ``suffix``: the stem's own dots (``cuda_smem.race_fp32.1024x262144``) are not a suffix."""
    return stem.parent / (stem.name + suffix)


def ncu_command(ncu: str, out: Path, child: list[str], section_set: str = "full",
                clock_control: str = "none", extra: tuple[str, ...] = ()) -> list[str]:
    return [ncu, "--set", section_set, "--clock-control", clock_control, "--profile-from-start", "off",
            "--target-processes", "all", "-f", "-o", str(out), *extra, *child]


def profile_variant(chapter: str, variant: str, shape: str | None = None, *, section_set: str = "full",
                    clock_control: str = "none", iters: int = 1, extra: tuple[str, ...] = (),
                    params: dict | None = None, slug: str | None = None, timeout: float | None = 1800,
                    race: str | None = None, skip_dsl: bool = False) -> ProfileResult:
    """Profile ``variant`` of ``chapter``'s race at ``shape`` (``"4096"``, ``"4096x4096"``; default the
    race's largest) under Nsight Compute; save the report and return the per-kernel summary. ``skip_dsl``: the
    child replays the chapter's ``%%dsl`` cells as stand-ins (for a variant that is not one of theirs)."""
    require_gpu("%ncu")
    ncu = find_ncu()
    # ncu writes under a name of the variant's own; once the child has said which shape it ran (the default is the
    # race's largest, which only the chapter knows), the report is renamed for its race and shape.
    stem = _chapter_stem(chapter)
    out = report_path(stem, variant, slug).with_name(f"{variant}.partial")
    out.parent.mkdir(parents=True, exist_ok=True)
    child = child_command(chapter, variant, shape, "ncu", iters, params, race, skip_dsl)
    cmd = ncu_command(ncu, out, child, section_set, clock_control, extra)
    log, record, reason, partial = _run(cmd, out, timeout)
    if record and not record.get("ok", False):
        raise ProfilerError(f"the child could not run {variant!r}: {record.get('error')}", detail=log_tail(log))
    _written(partial, reason, log)
    final = report_path(stem, variant, slug, race=race, shape=record.get("shape") or None)
    report = _with_suffix(final, ".ncu-rep")
    partial.replace(report)
    kernels = read_report(report, ncu)
    if not kernels:
        raise ProfilerError(reason or "the report holds no kernels", detail=log_tail(log))
    _save_csv(_with_suffix(final, ".csv"), kernels)
    save_raw_page(report, ncu)
    return ProfileResult(chapter=record.get("chapter", str(chapter)), variant=variant,
                         shape=record.get("shape", shape or ""), report=report, kernels=kernels, iters=iters,
                         nbytes=record.get("nbytes"), flops=record.get("flops"), command=cmd)


def profile_variants(chapter: str, variants, shape: str | None = None, *, section_set: str = "full",
                     clock_control: str = "none", iters: int = 1, extra: tuple[str, ...] = (),
                     params: dict | None = None, slug: str | None = None, timeout: float | None = 1800,
                     race: str | None = None, skip_dsl: bool = False) -> list[ProfileResult]:
    """:func:`profile_variant` for each of ``variants``, in one child under one ncu (see the module docstring): the
    same report folder, summaries and raw pages per variant, the report shared. One variant takes
    :func:`profile_variant`'s path. A variant the child could not run is a :class:`ProfilerError` naming it, raised
    after the others' summaries are saved, with their results as its ``results``."""
    variants = [check_variant_name(v) for v in variants]
    if len(variants) == 1:
        return [profile_variant(chapter, variants[0], shape, section_set=section_set, clock_control=clock_control,
                                iters=iters, extra=extra, params=params, slug=slug, timeout=timeout, race=race,
                                skip_dsl=skip_dsl)]
    if len(set(variants)) != len(variants):
        raise LabError(f"%ncu: a variant is named twice in {' '.join(variants)}")
    dims = _dims(shape)
    require_gpu("%ncu")
    ncu = find_ncu()
    stem = _chapter_stem(chapter)
    joined = report_stem(variants)
    out = report_path(stem, variants[0], slug).with_name(f"{joined}.partial")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="labmagic-ncu-") as tmp:
        jobs = write_jobs(Path(tmp) / "jobs.json", [(v, dims) for v in variants])
        child = child_command(chapter, None, None, JOBS_MODE, iters, params, race, skip_dsl, jobs=str(jobs))
        cmd = ncu_command(ncu, out, child, section_set, clock_control, extra)
        log, record, reason, partial = _run(cmd, out, timeout)
    if not record.get("ok"):
        raise ProfilerError(f"the child could not replay the chapter: {record.get('error') or reason}",
                            detail=log_tail(log))
    _written(partial, reason, log)
    entries = record.get("jobs") or []
    shapes = {e.get("shape") for e in entries if e.get("shape")}
    final = report_path(stem, variants[0], slug, race=race, shape=shapes.pop() if len(shapes) == 1 else None)
    report = _with_suffix(final.with_name(joined + final.name[len(variants[0]):]), ".ncu-rep")
    partial.replace(report)
    kernels = read_report(report, ncu)
    try:
        per_job = split_calls(kernels, entries)
    except LabError as exc:
        raise ProfilerError(str(exc), detail=log_tail(log)) from exc
    raw = _raw_page(report, ncu)
    results, failed = [], []
    for entry, calls in zip(entries, per_job):
        variant, mine = entry.get("variant", ""), [k for call in calls for k in call]
        if entry.get("error") or not mine:
            failed.append(f"{variant}: {entry.get('error') or reason or 'no kernel between its markers'}")
            continue
        named = report_path(stem, variant, slug, race=race, shape=entry.get("shape") or None)
        _save_csv(_with_suffix(named, ".csv"), mine)
        raw_page_path(_with_suffix(named, ".ncu-rep")).write_text(raw_rows(raw, {k.id for k in mine}),
                                                                 encoding="utf-8")
        results.append(ProfileResult(chapter=record.get("chapter", str(chapter)), variant=variant,
                                     shape=entry.get("shape", ""), report=report, kernels=mine,
                                     iters=int(entry.get("calls") or iters), nbytes=entry.get("nbytes"),
                                     flops=entry.get("flops"), command=cmd))
    if failed:
        error = ProfilerError("ncu has no kernels of " + "; ".join(failed), detail=log_tail(log))
        error.results = results
        raise error
    return results


def _run(cmd: list[str], out: Path, timeout: float | None) -> tuple[str, dict, str | None, Path]:
    """Run ``cmd`` (ncu and its child): its output, the child's record, ncu's failure reason if any and where the
    report goes; a permission failure raised at once (its fix is the message)."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=repo_root(), env=child_env())
    log = proc.stdout + proc.stderr
    reason = diagnose(log)
    if reason and "ERR_NVGPUCTRPERM" in reason:
        raise ProfilerError(reason)
    if reason is None and proc.returncode != 0:
        reason = f"ncu exited with code {proc.returncode}"
    return log, child_record(proc.stdout), reason, _with_suffix(out, ".ncu-rep")


def _written(report: Path, reason: str | None, log: str) -> None:
    if not report.exists():
        raise ProfilerError(reason or "ncu wrote no report", detail=log_tail(log))


def report_stem(variants: list[str]) -> str:
    """The shared report's name for several variants: ``v1-v2-v3`` (a variant name has no ``-``), or, past 120
    characters (a file name has 255 bytes, and the race and shape follow), the first, the count and a digest."""
    joined = "-".join(variants)
    if len(joined) <= 120:
        return joined
    digest = hashlib.sha1(joined.encode()).hexdigest()[:8]
    return f"{variants[0]}-and-{len(variants) - 1}-more-{digest}"


def _dims(shape: str | None) -> tuple[int, ...] | None:
    """``"2**28"``, ``"4096x4096"``, ``"31 17 29"`` -> a tuple of sizes, as the child reads ``--shape``; None: the
    race's largest."""
    if shape is None:
        return None
    try:
        return parse_shape(str(shape).split())
    except SystemExit as exc:
        raise LabError(str(exc).replace("--shape: ", "%ncu --shape: ")) from None


def raw_rows(page: str, ids: set[int]) -> str:
    """Of ncu's raw page (header, units, one row per kernel), the header, units and the rows of kernels ``ids``,
    quoted as ncu quotes them; lines before the header (``==PROF==``) are dropped."""
    lines = page.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return ""
    rows = list(csv.reader(lines[start:]))
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerows(rows[:2])
    writer.writerows(r for r in rows[2:] if r and r[0].strip().isdigit() and int(r[0]) in ids)
    return out.getvalue()


def _raw_page(report: Path, ncu: str | None, *options: str) -> str:
    """``ncu --import REPORT --csv --page raw [options]``: one row per kernel, one column per metric."""
    proc = subprocess.run([ncu or find_ncu(), "--import", str(report), "--csv", "--page", "raw", *options],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise ProfilerError(f"ncu --import {report.name} failed", detail=log_tail(proc.stdout + proc.stderr))
    return proc.stdout


def read_report(report: Path, ncu: str | None = None) -> list[KernelProfile]:
    """Per-kernel metrics of a saved ``.ncu-rep`` (raw page, base units)."""
    return parse_raw_csv(_raw_page(report, ncu, "--print-units", "base"))


def raw_page_path(report: Path) -> Path:
    """Where :func:`save_raw_page` puts ``report``'s metric page: ``<variant>.<race>.<shape>.raw.csv`` beside it."""
    return report.with_name(report.name.removesuffix(".ncu-rep") + ".raw.csv")


def save_raw_page(report: Path, ncu: str | None = None) -> Path:
    """Every metric of every kernel in ``report``, in Nsight Compute's display units (``ncu --import R --csv --page
    raw``, what its GUI's Raw page shows), saved beside it. A full report is megabytes; this page is what the book
    commits when the report is too large to, so every profile leaves one, made from the same report."""
    path = raw_page_path(report)
    path.write_text(_raw_page(report, ncu), encoding="utf-8")
    return path


def _save_csv(path: Path, kernels: list[KernelProfile]) -> bool:
    """A flat summary next to the report, for diffs and the book's tables."""
    rows = summary_rows(kernels)
    if not rows:
        return False
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return True


def _chapter_stem(chapter: str) -> str:
    try:
        return chapter_path(chapter).stem
    except LabError:
        return Path(str(chapter)).stem


