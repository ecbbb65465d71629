"""A bench table cross-checked by Nsight Compute (``%bench RACE --nsight``, ``labmagic sweep --timer nsight``).

``%bench`` times with CUDA events (:mod:`labmagic.timing`): the time from an event recorded before a call to one
recorded after it, on rotated input sets so that L2 starts cold. Nsight Compute times each kernel on the GPU itself
(``gpu__time_duration.sum``) and flushes the caches before each kernel it profiles, so the two should agree wherever
a call's time is its kernels' time. The book claims agreement within 5% (:data:`AGREE_WITHIN`) for calls of 50 us
and longer (:data:`CLAIMED_FROM_MS`); below that, launch latency and the gaps between a call's kernels are a large
part of what the events see and Nsight does not, so a short call is reported as such, not judged.

After :func:`~labmagic.benchmark.runner.bench`, every row with status ``ok`` is timed again in **one** child process
(:mod:`labmagic.child.ncu_time`, the chapter replayed from disk) under

    ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum \\
        --csv --page raw --print-units base --log-file LOG  python -m labmagic.child --mode nsight-time ...

``--clock-control none`` keeps the boost clocks the events saw (ncu would lock the base clock); the default cache
control flushes caches per kernel, as the bench's rotation does; ``--profile-from-start off`` with the child's
``cudaProfilerStart/Stop`` leaves input creation and warm-up out. Each call sits between two marker kernels, so the
launch-ordered rows of the CSV split into calls (:func:`split_calls`); a call's Nsight time is the sum of its
kernels' durations (two for a JAX call that launches two, three for a three-kernel variant), and a row's is the median
over its calls. The :class:`NsightCheck` lists both medians, their ratio (events / Nsight) and a verdict per row;
after a saved GPU run it is written to ``results/<gpu>/nsight_check/<chapter>.csv`` (:data:`COLUMNS`).

What Nsight cannot see, events do: host-side gaps, memcpys and memsets inside a call, a synchronize the variant
does. A ``disagrees`` row is a question about the variant (or the timer), not a verdict on either.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..child.ncu_report import KernelProfile, diagnose, parse_raw_csv
from ..child.ncu_run import find_ncu
from ..child.ncu_time import MODE, split_calls, write_jobs
from ..child.protocol import child_command, child_env, child_record, log_tail
from ..errors import LabError
from ..paths import atomic_write, chapter_path, check_chapter_name, repo_root, results_dir
from ..runtime import has_gpu, require_gpu
from ..store.schema import OK
from ..store.table_csv import read_table
from .race import BenchResult, Race

#: Events and Nsight agree when their ratio is within this of 1.
AGREE_WITHIN = 0.05
#: Calls shorter than this (ms) on both timers are launch-bound: outside the claim, not judged.
CLAIMED_FROM_MS = 0.050

AGREES, DISAGREES, SHORT, MISSING = "agrees", "disagrees", "short (<50 us, launch-bound)", "no nsight time"

#: The columns of ``results/<gpu>/nsight_check/<chapter>.csv``, written and read here only.
COLUMNS = ("variant", "shape", "dtype", "event_ms", "nsight_ms", "ratio", "verdict", "git_commit", "timestamp")

#: The note ``%bench --nsight`` leaves where no cross-check can run.
NO_GPU_NOTE = "--nsight needs a GPU and Nsight Compute: no cross-check"

METRIC = "gpu__time_duration.sum"


def verdict(event_ms: float | None, nsight_ms: float | None) -> str:
    """``agrees`` / ``disagrees`` for calls of 50 us or more on either timer, ``short`` below, ``no nsight time``
    without both times."""
    if event_ms is None or not nsight_ms:
        return MISSING
    if max(event_ms, nsight_ms) < CLAIMED_FROM_MS:
        return SHORT
    return AGREES if abs(event_ms / nsight_ms - 1) <= AGREE_WITHIN else DISAGREES


@dataclass
class NsightRow:
    """One bench row and its Nsight time: the median over ``calls`` calls of each call's kernel-time sum."""

    variant: str
    shape: str
    dtype: str
    event_ms: float | None
    nsight_ms: float | None = None
    calls: int = 0
    kernels: int | None = None  # kernels per call (the median call's count)
    note: str = ""

    @property
    def ratio(self) -> float | None:
        """Events / Nsight: above 1 the events saw more than the kernels' time."""
        return self.event_ms / self.nsight_ms if self.event_ms and self.nsight_ms else None

    @property
    def verdict(self) -> str:
        return verdict(self.event_ms, self.nsight_ms)

    @property
    def judged(self) -> bool:
        """Long enough for the claim, with both times."""
        return self.verdict in (AGREES, DISAGREES)


@dataclass
class NsightCheck:
    """The cross-check of one bench result: a row per timed row, and how it was made."""

    chapter: str
    device: str
    iters: int
    rows: list[NsightRow]
    notes: list[str] = field(default_factory=list)
    provenance: dict[str, str] = field(default_factory=dict)
    csv_path: Path | None = None
    command: list[str] = field(default_factory=list)

    #: The claim each judged row is held to, in words.
    claim = f"calls of {CLAIMED_FROM_MS * 1e3:.0f} us or more agree within {AGREE_WITHIN:.0%}"

    @property
    def worst_ratio(self) -> float | None:
        """The judged rows' ratio farthest from 1 (either way); None when no row is long enough to judge."""
        judged = [r.ratio for r in self.rows if r.judged]
        return max(judged, key=lambda x: abs(math.log(x))) if judged else None

    def _repr_html_(self) -> str:
        from ..display.ncu_view import check_html

        return check_html(self)

    def __repr__(self) -> str:
        from ..display.ncu_view import check_text

        return check_text(self)


# -- reading ncu's rows back into calls ------------------------------------------------------------------

def call_ms(call: list[KernelProfile]) -> float | None:
    """A call's Nsight time: the sum of its kernels' ``gpu__time_duration.sum``, in ms (None: a kernel lacks it)."""
    durations = [k.duration_s for k in call]
    if any(d is None for d in durations):
        return None
    return sum(durations) * 1e3


def job_rows(kernels: list[KernelProfile], record: dict, rows: list[NsightRow]) -> None:
    """Fill each row's Nsight median from the profiled kernels and the child's record of its jobs."""
    jobs = record.get("jobs") or []
    by_key = {(r.variant, r.shape): r for r in rows}
    for job, calls in zip(jobs, split_calls(kernels, jobs)):
        row = by_key.get((job.get("variant"), job.get("shape")))
        if row is None:
            continue
        if job.get("error"):
            row.note = f"the child could not run it: {job['error']}"
            continue
        times = [call_ms(c) for c in calls]
        if not calls or any(t is None for t in times):
            row.note = f"ncu gave no {METRIC} for some of its kernels" if calls else "no call was profiled"
            continue
        if not any(times):
            row.note = "launched no kernel between the markers (a CPU fallback, or a view?)"
            continue
        row.nsight_ms, row.calls = statistics.median(times), len(times)
        row.kernels = int(statistics.median_low([len(c) for c in calls]))


# -- running ----------------------------------------------------------------------------------------------

def ncu_time_command(ncu: str, log_file: str, child: list[str]) -> list[str]:
    return [ncu, "--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all",
            "--metrics", METRIC, "--csv", "--page", "raw", "--print-units", "base", "--log-file", log_file, *child]


def timed_rows(result: BenchResult) -> list[NsightRow]:
    """A row to cross-check per row of ``result`` that the events timed."""
    return [NsightRow(r.variant, r.shape, r.dtype, r.ms_median) for r in result.rows
            if r.status == OK and r.ms_median]


def cross_check(race: Race, result: BenchResult, iters: int = 10, *, params: dict | None = None,
                timeout: float | None = 1800) -> NsightCheck:
    """Time every ``ok`` row of ``result`` again under Nsight Compute, ``iters`` calls each, in one child; see the
    module docstring. Raises :class:`LabError` when it cannot run at all (no GPU, no ncu, a race that is no chapter
    on disk, a child that died); writes the CSV when ``result`` was saved."""
    require_gpu("--nsight")
    rows = timed_rows(result)
    check = NsightCheck(result.chapter, result.device, iters, rows, provenance=dict(result.provenance))
    if not rows:
        check.notes.append("no row was timed: nothing to cross-check")
        return check
    try:
        notebook = str(chapter_path(race.chapter))
    except LabError as exc:
        raise LabError(f"race {race.chapter!r} is not a chapter notebook in book/ (the child replays the chapter "
                       "from disk)") from exc
    ncu = find_ncu()
    with tempfile.TemporaryDirectory(prefix="labmagic-nsight-") as tmp:
        jobs = write_jobs(Path(tmp) / "jobs.json", [(r.variant, r.shape) for r in rows])
        log_file = Path(tmp) / "ncu.csv"
        child = child_command(notebook, None, None, MODE, iters, params, jobs=str(jobs))
        check.command = ncu_time_command(ncu, str(log_file), child)
        try:
            proc = subprocess.run(check.command, capture_output=True, text=True, timeout=timeout, cwd=repo_root(),
                                  env=child_env())
        except subprocess.TimeoutExpired as exc:
            raise LabError(f"the ncu child ran past {timeout:.0f} s ({len(rows)} rows x {iters} calls)") from exc
        table = log_file.read_text() if log_file.exists() else ""
    log = "\n".join((proc.stdout, proc.stderr, table))
    reason = diagnose(log)
    if reason and "ERR_NVGPUCTRPERM" in reason:
        raise LabError(reason)
    record = child_record(proc.stdout)
    if not record.get("ok"):
        raise LabError(f"the nsight child failed: {record.get('error') or reason or f'exit code {proc.returncode}'}",
                       detail=log_tail(log))
    job_rows(parse_raw_csv(table), record, rows)
    if result.csv_path is not None:
        check.csv_path = save_check(check)
    return check


def nsight_checked(race: Race, result: BenchResult, iters: int = 10) -> None:
    """``%bench --nsight``: attach the cross-check to ``result`` (``result.nsight_check``), or leave one note saying
    why there is none (no GPU, no ncu, no chapter on disk)."""
    if not (result.measured and has_gpu()):
        result.notes.append(NO_GPU_NOTE)
        return
    try:
        result.nsight_check = cross_check(race, result, iters)
    except LabError as exc:
        result.notes.append(f"nsight: {str(exc).splitlines()[0]}; no cross-check")


# -- the CSV ------------------------------------------------------------------------------------------------

def check_csv_path(chapter: str, slug: str | None = None) -> Path:
    """``results/<slug>/nsight_check/<chapter>.csv``."""
    return results_dir(slug) / "nsight_check" / f"{check_chapter_name(chapter)}.csv"


def csv_cells(check: NsightCheck) -> list[dict[str, str]]:
    def num(x):
        return "" if x is None else f"{x:.6g}"

    return [{"variant": r.variant, "shape": r.shape, "dtype": r.dtype, "event_ms": num(r.event_ms),
             "nsight_ms": num(r.nsight_ms), "ratio": num(r.ratio), "verdict": r.verdict,
             "git_commit": check.provenance.get("git_commit", ""), "timestamp": check.provenance.get("timestamp", "")}
            for r in check.rows]


def save_check(check: NsightCheck, path: Path | str | None = None) -> Path:
    """Replace this check's rows (same variant, shape, dtype) in the chapter's cross-check CSV, atomically; rows of
    other shapes and variants from earlier runs stay."""
    path = Path(path) if path else check_csv_path(check.chapter)
    new = csv_cells(check)
    keys = {(c["variant"], c["shape"], c["dtype"]) for c in new}
    kept = []
    if path.exists():
        with open(path, newline="", encoding="utf-8") as handle:
            kept = [{c: row.get(c, "") for c in COLUMNS} for row in csv.DictReader(handle)
                    if (row.get("variant"), row.get("shape"), row.get("dtype")) not in keys]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(COLUMNS), lineterminator="\n")
    writer.writeheader()
    writer.writerows(kept + new)
    return atomic_write(path, out.getvalue())


#: What :func:`verdict` writes: the only values a CSV's ``verdict`` cell may hold.
VERDICTS = (AGREES, DISAGREES, SHORT, MISSING)
_TIMES = ("event_ms", "nsight_ms", "ratio")


def read_check_csv(path: Path | str, name: str | None = None) -> list[dict]:
    """The rows of a cross-check CSV (:data:`COLUMNS`), times as floats (None where empty). CSVs come from other
    machines: anything :func:`save_check` does not write is a :class:`LabError` naming the file (``name``, else its
    path) and the line."""
    rows = []
    for where, row in read_table(path, COLUMNS, name or str(path), "labmagic.benchmark.ncu_check.COLUMNS"):
        for col in _TIMES:
            row[col] = _time_cell(row[col], col, where)
        if row["verdict"] not in VERDICTS:
            raise LabError(f"{where}: verdict {row['verdict']!r} is none of {', '.join(VERDICTS)}")
        rows.append(row)
    return rows


def _time_cell(text: str, col: str, where: str) -> float | None:
    if text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise LabError(f"{where}: {col} is {text!r}, not a time")
    return value
