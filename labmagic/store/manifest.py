"""The sweep's record of each chapter run on each GPU: ``results/<gpu>/notebooks/<chapter>.json``.

``labmagic sweep`` writes one record per chapter and GPU when a run ends: its status, the size preset, the
hash of the chapter's sources (:mod:`labmagic.store.fingerprint`) that the run executed, the hash of the
executed notebook it published, the machine that stored it (:func:`machine_id`) and what its races found (how many
variants passed their check, failed it, needed a GPU or were skipped). A failed run keeps, as ``last_passed``, the
run that the results still on disk came from. These records decide which chapters a sweep skips (up to date) and
which stored results are stale.

A record is this machine's own: one that another machine wrote (a clone's committed copy), one without a machine
(from before machines were recorded), or one that cannot be read never makes a chapter up to date; the chapter runs
again (:func:`freshness` says why).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import uuid
from collections import Counter
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


#: Files that name this machine, in the order they are tried (systemd's, then D-Bus's).
MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id")


def machine_id() -> str:
    """This machine, as a record names it: 16 hex digits of a hash of its machine id (``/etc/machine-id``; else the
    network card's address) and its host name (containers of one image share the image's machine id, not their host
    names). A hash: a record is committed and published, the machine's own id is not."""
    ident = ""
    for name in MACHINE_ID_FILES:
        try:
            ident = Path(name).read_text(encoding="utf-8").strip()
        except OSError:
            continue
        if ident:
            break
    ident = ident or f"{uuid.getnode():012x}"
    return hashlib.sha256(f"labmagic machine {ident} {socket.gethostname()}".encode()).hexdigest()[:16]


def freshness(notebook: Path, slug: str, size: str, timer: str = "events") -> tuple[bool, str]:
    """Whether the chapter is up to date on this GPU of this machine, and why (or why not): its last run here
    passed, with these sources, this size preset and this timer (``events``, or ``graph`` for a ``labmagic sweep
    --timer graph``, whose rows replace the events rows; a record without one was timed with events), and the
    executed notebook on disk is the one that run published."""
    path = manifest_path(slug, notebook.stem)
    last = read_manifest(slug, notebook.stem)
    if last is None or not isinstance(last, dict):
        return False, "no record of a run here" if not path.exists() else "its record cannot be read"
    if last.get("machine") != machine_id():
        return False, "its record comes from another machine" if last.get("machine") else "its record names no machine"
    if last.get("status") != "passed":
        return False, f"its last run here {last.get('status', 'did not finish')}"
    if last.get("input_hash") != chapter_hash(notebook):
        return False, "its sources changed since its last run here"
    if last.get("size") != size:
        return False, f"its last run here was at size {last.get('size')!r}, not {size!r}"
    if last.get("timer", "events") != timer:
        return False, f"its last run here timed its races with {last.get('timer')!r}, not {timer!r}"
    if not published_by(last, path.with_suffix(".ipynb")):
        return False, "its executed notebook is not the one its record vouches for"
    return True, (f"up to date: passed here at {str(last.get('started', '?'))[:16]}, sources, size and timer "
                  "unchanged")


def up_to_date(notebook: Path, slug: str, size: str) -> bool:
    """:func:`freshness`, without the reason."""
    return freshness(notebook, slug, size)[0]


# -- what a run's races found ----------------------------------------------------------------------------------

#: Where a chapter's races note their rows while a sweep runs it (a file the sweep names, one JSON line per row).
RUN_ROWS_ENV = "LABMAGIC_RUN_ROWS"

#: A variant's outcome in a run, from the statuses of its rows (the worst wins): its check failed, it needed a GPU,
#: it was skipped (a DSL not installed, a size above its limit), or it passed (measured, or checked and predicted).
OUTCOMES = {"mismatch": "fail", "error": "fail", "oom": "fail", "needs_gpu": "needs_gpu", "skipped": "skipped",
            "ok": "pass", "predicted": "pass"}
_WORST = ("fail", "needs_gpu", "skipped", "pass")


def note_rows(rows) -> None:
    """In a chapter a sweep runs, add a race's rows (chapter, variant, status) to the file :data:`RUN_ROWS_ENV`
    names; nothing elsewhere."""
    target = os.environ.get(RUN_ROWS_ENV)
    if not target:
        return
    lines = "".join(json.dumps({"chapter": r.chapter, "variant": r.variant, "status": r.status}) + "\n" for r in rows)
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(lines)


def note_host_seconds(seconds: float) -> None:
    """In a chapter a sweep runs, add the wall time one row's host figures took (:func:`labmagic.timing.time_host`)
    to the file :data:`RUN_ROWS_ENV` names, so the run's record says what they cost the sweep; nothing elsewhere."""
    target = os.environ.get(RUN_ROWS_ENV)
    if target:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"host_seconds": round(float(seconds), 4)}) + "\n")


def host_seconds(path: Path) -> float:
    """The wall time a run's host figures took, summed from the lines :func:`note_host_seconds` wrote (0 if none)."""
    total = 0.0
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return 0.0
    for line in lines:
        try:
            total += float(json.loads(line).get("host_seconds", 0.0))
        except (ValueError, TypeError, AttributeError):
            continue
    return total


def variant_counts(path: Path) -> dict[str, int]:
    """How many variants of a run's races passed, failed, needed a GPU or were skipped (each variant once, by the
    worst outcome of its rows), from the file :func:`note_rows` wrote; {} when it wrote none."""
    worst: dict[tuple[str, str], str] = {}
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return {}
    for line in lines:
        try:
            row = json.loads(line)
            key, outcome = (str(row["chapter"]), str(row["variant"])), OUTCOMES.get(str(row["status"]), "fail")
        except (ValueError, KeyError, TypeError):
            continue
        if key not in worst or _WORST.index(outcome) < _WORST.index(worst[key]):
            worst[key] = outcome
    counts = Counter(worst.values())
    return {outcome: counts.get(outcome, 0) for outcome in reversed(_WORST)} if worst else {}


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
    """Store a run's record (``record["device"]`` and ``record["chapter"]`` say where) as this machine's
    (:func:`machine_id`); a failed run carries the last passing run forward, so the results it left in place keep
    their provenance."""
    return atomic_write(manifest_path(record["device"], record["chapter"]), manifest_text(record))


def manifest_text(record: dict) -> str:
    """What :func:`write_manifest` stores for ``record``: its JSON, stamped with this machine (:func:`machine_id`),
    with ``last_passed`` for a failed run."""
    slug, chapter = record["device"], record["chapter"]
    record = {**record, "machine": machine_id()}
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
