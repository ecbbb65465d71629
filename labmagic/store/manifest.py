"""The sweep's record of each chapter run on each GPU: ``results/<gpu>/notebooks/<chapter>.json``.

``labmagic sweep`` writes one record per chapter and GPU when a run ends: its status, the size preset, the
hash of the chapter's sources (:mod:`labmagic.store.fingerprint`) that the run executed, and the hash of the
executed notebook it published. A failed run keeps, as ``last_passed``, the run that the results still on disk came
from. These records decide which chapters a sweep skips (up to date) and which stored results are stale.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from pathlib import Path

from ..paths import all_chapters, atomic_write, results_dir
from .fingerprint import chapter_hash


def manifest_path(slug: str, chapter: str) -> Path:
    return results_dir(slug) / "notebooks" / f"{chapter}.json"


def read_manifest(slug: str, chapter: str) -> dict | None:
    path = manifest_path(slug, chapter)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def passed_run(manifest: dict | None) -> dict | None:
    """The run that the results on disk come from: the manifest's own when it passed, else the last one that
    did (a failed re-run keeps the previous results in place and records their run as ``last_passed``)."""
    if not manifest:
        return None
    return manifest if manifest.get("status") == "passed" else manifest.get("last_passed")


def notebook_hash(path: Path) -> str:
    """sha256 (16 hex digits) of an executed notebook's bytes: which notebook a record vouches for."""
    return content_hash(Path(path).read_bytes())


def content_hash(data: bytes) -> str:
    """:func:`notebook_hash` of a notebook held in memory (one a cluster worker sent back)."""
    return hashlib.sha256(data).hexdigest()[:16]


def up_to_date(notebook: Path, slug: str, size: str) -> bool:
    """The chapter's last run on this GPU passed, with these sources and this size preset, and the executed
    notebook on disk is the one that run published."""
    last = read_manifest(slug, notebook.stem)
    return bool(
        last
        and last.get("status") == "passed"
        and last.get("input_hash") == chapter_hash(notebook)
        and last.get("size") == size
        and published_by(last, manifest_path(slug, notebook.stem).with_suffix(".ipynb"))
    )


def published_by(record: dict, executed: Path) -> bool:
    """Whether ``executed`` is the notebook that ``record``'s run published, not one a later, interrupted run (or
    the papermill it orphaned) wrote over it: by the hash the record keeps, or, in records from before hashes were
    kept, by papermill's start time falling within the recorded run."""
    try:
        if "notebook_hash" in record:
            return notebook_hash(executed) == record["notebook_hash"]
        meta = json.loads(Path(executed).read_text(encoding="utf-8")).get("metadata", {}).get("papermill", {})
        began = datetime.fromisoformat(str(meta["start_time"]))
        run_began = datetime.fromisoformat(str(record["started"]))  # whole seconds, taken before papermill starts
        return run_began <= began <= run_began + timedelta(seconds=float(record["seconds"]) + 1)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return False


def stale_chapters(slug: str, skip: set[str] = frozenset()) -> list[str]:
    """Chapters with a stored run on this GPU whose sources have changed since (not counting ``skip``)."""
    stale = []
    for notebook in all_chapters():
        if notebook.stem in skip:
            continue
        passed = passed_run(read_manifest(slug, notebook.stem))
        if passed and passed.get("input_hash") != chapter_hash(notebook):
            stale.append(notebook.stem)
    return stale



def write_manifest(record: dict) -> Path:
    """Store a run's record (``record["device"]`` and ``record["chapter"]`` say where); a failed run carries
    the last passing run forward, so the results it left in place keep their provenance."""
    return atomic_write(manifest_path(record["device"], record["chapter"]), manifest_text(record))


def manifest_text(record: dict) -> str:
    """What :func:`write_manifest` stores for ``record``: its JSON, with ``last_passed`` for a failed run."""
    slug, chapter = record["device"], record["chapter"]
    if record.get("status") == "failed":
        last_passed = passed_run(read_manifest(slug, chapter))
        if last_passed:
            record = {**record, "last_passed": {k: last_passed.get(k) for k in ("input_hash", "size", "started")}}
    return json.dumps(record, indent=2) + "\n"


def notebook_problem(data: bytes) -> str | None:
    """Why ``data`` is not an executed notebook that a record may vouch for (what nbformat says about it), or None:
    a papermill cut short by a full disk or a kill leaves a truncated file behind."""
    import nbformat

    try:
        text = data.decode("utf-8")
        json.loads(text)
    except UnicodeDecodeError:
        return "not UTF-8 text"
    except json.JSONDecodeError as exc:
        return f"not JSON ({exc.msg}: line {exc.lineno}, column {exc.colno})"
    try:
        nb = nbformat.reads(text, as_version=4)
        cells = nb.get("cells")
    except Exception as exc:  # noqa: BLE001 - nbformat raises several kinds (ValidationError, KeyError, ...)
        first = "".join(c if c.isprintable() else "?" for c in (str(exc).strip().splitlines() or [""])[0][:200])
        return f"nbformat cannot read it ({type(exc).__name__}{': ' + first if first else ''})"
    return None if isinstance(cells, list) else "it holds no list of cells"
