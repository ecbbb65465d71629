"""What a chapter run on a Dask worker sends back, and how the driver stores it: the same files, in the same
places, written the same way as a sweep on this machine writes them.

On the worker, :func:`clear` empties a scratch checkout of the chapter's stored results before the run, and
:func:`pack` gathers what the run wrote: the executed notebook and its log, the record
(:mod:`labmagic.store.manifest`), the chapter's bench CSV rows, its plots and its profiles. On the driver,
:func:`publish` checks that the result is whole (the notebook its record vouches for is a notebook), writes every
file into a temporary beside its place, then the rows through the CSV's locked merge
(:func:`labmagic.store.bench_csv.write_rows`: two sweeps writing one chapter lose no rows), and only then renames
the files into place, the record last: a full disk publishes nothing, and a record never vouches for a file that is
not in place.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..errors import LabError
from ..paths import check_chapter_name, results_dir, staged_write
from ..store.bench_csv import bench_csv_path, read_rows, write_rows
from ..store.manifest import content_hash, manifest_path, manifest_text, notebook_problem, read_manifest

#: A GPU kind, as a results folder names it (``nvidia-h200``, ``cpu``).
KIND_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")


@dataclass
class ChapterResult:
    """One chapter's run on one kind of GPU, as bytes that travel from a worker to the driver."""

    chapter: str
    kind: str
    status: str  # passed | failed | interrupted
    seconds: float = 0.0
    error: str = ""
    record: dict | None = None
    notebook: bytes | None = None  # None when papermill wrote none (the driver keeps its previous one)
    log: bytes | None = None
    rows: list[dict[str, str]] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)  # path under results/<kind>/ -> bytes: plots, profiles
    worker: str = ""


def check_kind(kind) -> str:
    if not isinstance(kind, str) or not KIND_NAME.fullmatch(kind):
        raise LabError(f"{kind!r} is not a GPU kind: use a results folder name like nvidia-h200 or cpu")
    return kind


def _is_chapter_file(relative: str, chapter: str) -> bool:
    """``bench/<chapter>.png``, ``bench/<chapter>.<dtype>.png`` or a file under ``profiles/<chapter>/``."""
    path = PurePosixPath(relative)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        return False
    if len(path.parts) == 2 and path.parts[0] == "bench":
        return re.fullmatch(re.escape(chapter) + r"(\.[A-Za-z0-9_]+)?\.png", path.parts[1]) is not None
    return len(path.parts) >= 3 and path.parts[:2] == ("profiles", chapter)


def _chapter_files(kind: str, chapter: str) -> dict[str, Path]:
    base = results_dir(kind)
    found = {}
    for path in [*(base / "bench").glob(f"{chapter}*.png"), *(base / "profiles" / chapter).rglob("*")]:
        relative = path.relative_to(base).as_posix()
        if path.is_file() and not path.is_symlink() and _is_chapter_file(relative, chapter):
            found[relative] = path
    return found


def clear(chapter: str, kind: str) -> None:
    """Remove the chapter's stored results for ``kind`` (in a worker's scratch checkout, before its run), so that
    what is there afterwards is what the run wrote."""
    csv_path = bench_csv_path(chapter, kind)
    for path in [csv_path, csv_path.with_name(csv_path.name + ".lock"), *_chapter_files(kind, chapter).values()]:
        path.unlink(missing_ok=True)
    shutil.rmtree(results_dir(kind) / "profiles" / chapter, ignore_errors=True)
    record = manifest_path(kind, chapter)
    for path in (record, record.with_suffix(".ipynb"), record.with_suffix(".log")):
        path.unlink(missing_ok=True)


def pack(chapter: str, kind: str, status: str, *, seconds: float = 0.0, error: str = "", worker: str = "",
         extra: dict | None = None) -> ChapterResult:
    """What a finished run left in ``results/<kind>/`` (of the checkout ``LABMAGIC_ROOT`` names), as a result;
    ``extra`` is added to the record (where the run happened)."""
    if status == "interrupted":
        return ChapterResult(chapter, kind, status, seconds, error, worker=worker)
    record = read_manifest(kind, chapter)
    if record is None:
        raise LabError(f"{chapter} on {kind}: the run wrote no record")
    record = {k: v for k, v in record.items() if k != "last_passed"}  # the driver's history decides that one
    record.update(extra or {})
    executed = manifest_path(kind, chapter).with_suffix(".ipynb")
    log = executed.with_suffix(".log")
    return ChapterResult(
        chapter, kind, status, seconds, error, record=record,
        notebook=executed.read_bytes() if "notebook_hash" in record else None,
        log=log.read_bytes() if log.exists() else b"",
        rows=read_rows(bench_csv_path(chapter, kind)),
        files={relative: path.read_bytes() for relative, path in sorted(_chapter_files(kind, chapter).items())},
        worker=worker,
    )


def check_whole(result: ChapterResult) -> None:
    """A one-line error unless ``result`` is a finished run with everything its record vouches for."""
    chapter, kind = check_chapter_name(result.chapter), check_kind(result.kind)
    what = f"{chapter} on {kind} from {result.worker or 'a worker'}"
    record = result.record
    if result.status not in ("passed", "failed"):
        raise LabError(f"{what}: a {result.status} run publishes nothing")
    if not isinstance(record, dict) or (record.get("chapter"), record.get("device"), record.get("status")) != (
            chapter, kind, result.status):
        raise LabError(f"{what}: its record does not describe this run")
    if result.log is None:
        raise LabError(f"{what}: no log came back")
    if (result.notebook is None) != ("notebook_hash" not in record) or (
            result.notebook is not None and content_hash(result.notebook) != record["notebook_hash"]):
        raise LabError(f"{what}: the notebook that came back is not the one its record vouches for")
    problem = notebook_problem(result.notebook) if result.notebook is not None else None
    if problem:
        raise LabError(f"{what}: the notebook that came back is not a notebook ({problem})")
    odd = [name for name in result.files if not _is_chapter_file(name, chapter)]
    if odd:
        raise LabError(f"{what}: {odd[0]!r} is not one of the chapter's plots or profiles")


def publish(result: ChapterResult) -> Path:
    """Store a worker's result in this checkout's ``results/<kind>/`` as a sweep here would: rows merged into the
    chapter's CSV, plots and profiles, notebook and log replaced, then the record (a failed run keeps
    ``last_passed``). Checks first that the result is whole, and writes every file before any goes into place: a
    LabError (a result that is not whole, a full disk) leaves everything as it was. Returns the notebook's path."""
    check_whole(result)
    chapter, kind = result.chapter, result.kind
    base = results_dir(kind)
    executed = manifest_path(kind, chapter).with_suffix(".ipynb")
    files = {base / relative: data for relative, data in result.files.items()}
    if result.notebook is not None:
        files[executed] = result.notebook
    files[executed.with_suffix(".log")] = result.log
    files[manifest_path(kind, chapter)] = manifest_text(dict(result.record))  # last: the record
    staged: list[tuple[Path, Path]] = []
    try:
        try:
            for final, data in files.items():
                staged.append((staged_write(final, data), final))
        except OSError as exc:
            raise LabError(f"{chapter} on {kind}: could not store {final.relative_to(base).as_posix()} "
                           f"({exc.strerror or exc})") from None
        if result.rows:
            write_rows(bench_csv_path(chapter, kind), result.rows)
        for temporary, final in staged:
            os.replace(temporary, final)
    finally:
        for temporary, _ in staged:
            temporary.unlink(missing_ok=True)
    plots = {name for name in result.files if name.startswith("bench/")}
    if plots and f"bench/{chapter}.png" not in plots:  # per-dtype plots replace the single one, as save_chapter_pngs
        (base / "bench" / f"{chapter}.png").unlink(missing_ok=True)
    return executed
