"""``labmagic sweep``: execute chapters with papermill on this machine, one GPU per worker.

Each chapter ``book/NN_name.ipynb`` is executed (in its own kernel, with ``book/`` as the working directory) into
``results/<gpu>/notebooks/NN_name.ipynb``, next to the bench CSVs and plots that the chapter writes for that GPU;
without a GPU the slug is ``cpu``. Beside each executed notebook, ``NN_name.json`` records the outcome and the hash of
the chapter's sources (:mod:`labmagic.fingerprint`), and ``NN_name.log`` the cell output. A chapter whose sources
and size preset have not changed since its last successful run on this GPU is skipped unless ``--force``.

Chapters receive papermill parameters through their cell tagged ``parameters``: ``size = "full"`` (the book's
numbers) or ``size = "quick"`` (smoke runs, ``--quick``). ``--reference`` writes the executed notebook back into
``book/`` (outputs included) on the book's own GPU, which is how the stored outputs that the site shows are made.
"""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from .errors import LabError
from .fingerprint import chapter_hash
from .paths import atomic_write, book_dir, repo_root, results_dir
from .runtime import _driver_devices, device_slug, gpu_name

#: The GPU whose outputs the book shows (``--reference`` refuses other devices). ``LABMAGIC_BOOK_GPU`` overrides.
BOOK_GPU = "nvidia-h200"
SIZES = ("full", "quick")
CHAPTER_GLOB = "[0-9][0-9]_*.ipynb"

_CELL_LINE = re.compile(r"Executing Cell (\d+)")
_ERROR_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Interrupt)\b.*)$")


@dataclass
class Outcome:
    """What happened to one chapter in one sweep."""

    chapter: str
    status: str  # passed | failed | skipped
    slug: str
    seconds: float = 0.0
    error: str = ""
    notebook: str = ""
    gpu: str | None = None
    details: dict = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------------- chapters


def all_chapters() -> list[Path]:
    return sorted(book_dir().glob(CHAPTER_GLOB))


def select_chapters(names: list[str]) -> list[Path]:
    """Chapters by number (``01``), stem (``01_vector_add``), name (``vector_add``) or path; all when none given."""
    chapters = all_chapters()
    if not names:
        return chapters
    chosen: list[Path] = []
    for name in names:
        stem = Path(name).stem
        matches = [c for c in chapters if stem in (c.stem, c.stem[:2], c.stem[3:])]
        if not matches:
            known = ", ".join(c.stem for c in chapters) or "none"
            raise LabError(f"no chapter {name!r} in {book_dir()} (chapters: {known})")
        chosen.extend(m for m in matches if m not in chosen)
    return chosen


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


def up_to_date(notebook: Path, slug: str, size: str) -> bool:
    """The chapter's last run on this GPU passed, with these sources and this size preset."""
    last = read_manifest(slug, notebook.stem)
    return bool(
        last
        and last.get("status") == "passed"
        and last.get("input_hash") == chapter_hash(notebook)
        and last.get("size") == size
        and (manifest_path(slug, notebook.stem).with_suffix(".ipynb")).exists()
    )


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


# ---------------------------------------------------------------------------------------------------- one chapter


def papermill_command(notebook: Path, output: Path, size: str | None, timeout: int | None) -> list[str]:
    cmd = [
        sys.executable, "-m", "papermill", str(notebook), str(output),
        "--cwd", str(notebook.parent), "--kernel", "python3",
        "--no-progress-bar", "--log-output", "--log-level", "INFO",
    ]
    if timeout:
        cmd += ["--execution-timeout", str(timeout)]
    if size:
        cmd += ["-p", "size", size]
    return cmd


def run_chapter(notebook: Path, slug: str, size: str, *, inject_size: bool, gpu: str | None = None,
                timeout: int | None = None, on_cell=None) -> Outcome:
    """Execute one chapter with papermill in a child process; record its outcome next to the executed notebook."""
    out_dir = results_dir(slug) / "notebooks"
    out_dir.mkdir(parents=True, exist_ok=True)
    output = out_dir / notebook.name
    log_path = output.with_suffix(".log")
    env = dict(os.environ, LABMAGIC_ROOT=str(repo_root()), LABMAGIC_SWEEP="1", PYDEVD_DISABLE_FILE_VALIDATION="1")
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    input_hash = chapter_hash(notebook)
    started = time.monotonic()
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    last_error = ""
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(
            papermill_command(notebook, output, size if inject_size else None, timeout),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=str(notebook.parent),
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            cell = _CELL_LINE.search(line)
            if cell and on_cell:
                on_cell(notebook.stem, int(cell.group(1)))
            err = _ERROR_LINE.match(line)
            if err:
                last_error = err.group(1).strip()
        code = proc.wait()
    seconds = time.monotonic() - started
    status = "passed" if code == 0 else "failed"
    error = "" if code == 0 else (last_error or f"papermill exited with status {code}; see {log_path}")
    record = {
        "chapter": notebook.stem, "status": status, "size": size, "input_hash": input_hash, "started": when,
        "seconds": round(seconds, 2), "error": error, "device": slug,
        "gpu_name": gpu_name(int(gpu)) if gpu else gpu_name(), "cuda_visible_devices": gpu,
        "python": sys.version.split()[0],
    }
    if status == "failed":  # keep what the results on disk were made from
        last_passed = passed_run(read_manifest(slug, notebook.stem))
        if last_passed:
            record["last_passed"] = {k: last_passed.get(k) for k in ("input_hash", "size", "started")}
    manifest_path(slug, notebook.stem).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return Outcome(notebook.stem, status, slug, seconds, error, str(output), gpu)


def write_reference(executed: Path, target: Path) -> None:
    """Copy an executed notebook into ``book/`` without papermill's per-run timing metadata (smaller diffs)."""
    nb = json.loads(executed.read_text(encoding="utf-8"))
    nb.get("metadata", {}).pop("papermill", None)
    for cell in nb.get("cells", []):
        meta = cell.get("metadata", {})
        meta.pop("papermill", None)
        meta.pop("execution", None)
    atomic_write(target, json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


# ---------------------------------------------------------------------------------------------------- many chapters


def parse_gpus(spec: str | None) -> list[str | None]:
    """Worker GPU ordinals: ``None`` (one worker, environment untouched), ``all``, or ``0,1`` (repeats allowed)."""
    if spec is None:
        return [None]
    if spec == "all":
        count = len(_driver_devices())
        return [str(i) for i in range(count)] or [None]
    gpus = [part.strip() for part in spec.split(",") if part.strip()]
    if not gpus or not all(g.isdigit() for g in gpus):
        raise LabError(f"--gpus takes 'all' or a comma-separated list of GPU ordinals, not {spec!r}")
    return gpus


def _slug_for(gpu: str | None) -> str:
    if gpu is None:
        return device_slug()
    name = gpu_name(int(gpu))
    return device_slug(name) if name else device_slug()


class _Progress:
    """A progress bar over chapters (tqdm where installed, plain lines otherwise) showing what each worker runs."""

    def __init__(self, total: int, title: str):
        self.running: dict[str, str] = {}
        self.lock = threading.Lock()
        try:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc=title, unit="chapter", dynamic_ncols=True,
                            bar_format="{desc}: {n_fmt}/{total_fmt} |{bar}| {elapsed}{postfix}")
        except ImportError:  # pragma: no cover - tqdm comes with papermill
            self.bar = None
            print(f"{title}: {total} chapter(s)", file=sys.stderr)

    def _postfix(self):
        if self.bar is not None:
            self.bar.set_postfix_str(", ".join(f"{c} {s}" for c, s in self.running.items()))

    def start(self, chapter: str):
        with self.lock:
            self.running[chapter] = ""
            self._postfix()
            if self.bar is None:
                print(f"  running {chapter}", file=sys.stderr)

    def cell(self, chapter: str, index: int):
        with self.lock:
            self.running[chapter] = f"cell {index}"
            self._postfix()

    def done(self, outcome: Outcome):
        line = f"  {outcome.status:7s} {outcome.chapter} ({outcome.seconds:.1f} s)"
        if outcome.error:
            line += f": {outcome.error}"
        with self.lock:
            self.running.pop(outcome.chapter, None)
            if self.bar is not None:
                self.bar.write(line, file=sys.stderr)
                self._postfix()
                self.bar.update(1)
            else:
                print(line, file=sys.stderr)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def sweep(chapters: list[Path], *, size: str = "full", inject_size: bool = False, force: bool = False,
          gpus: list[str | None] = (None,), timeout: int | None = None, reference: bool = False,
          quiet: bool = False) -> list[Outcome]:
    """Run chapters (skipping those up to date), one worker per entry of ``gpus``; return one outcome per chapter."""
    outcomes: list[Outcome] = []
    todo: "queue.Queue[Path]" = queue.Queue()
    slugs = {gpu: _slug_for(gpu) for gpu in gpus}
    for notebook in chapters:
        slug = slugs[gpus[0]]
        if not force and all(up_to_date(notebook, s, size) for s in set(slugs.values())):
            outcomes.append(Outcome(notebook.stem, "skipped", slug, details={"reason": "up to date"}))
        else:
            todo.put(notebook)
    progress = _Progress(todo.qsize(), f"sweep {', '.join(sorted(set(slugs.values())))}") if not quiet else None
    lock = threading.Lock()

    def worker(gpu: str | None):
        while True:
            try:
                notebook = todo.get_nowait()
            except queue.Empty:
                return
            if progress:
                progress.start(notebook.stem)
            try:
                outcome = run_chapter(notebook, slugs[gpu], size, inject_size=inject_size, gpu=gpu,
                                      timeout=timeout, on_cell=progress.cell if progress else None)
                if reference and outcome.status == "passed":
                    write_reference(Path(outcome.notebook), notebook)
            except Exception as exc:  # noqa: BLE001 - one chapter's failure must not stop the others
                outcome = Outcome(notebook.stem, "failed", slugs[gpu], error=f"{type(exc).__name__}: {exc}", gpu=gpu)
            if progress:
                progress.done(outcome)
            with lock:
                outcomes.append(outcome)

    threads = [threading.Thread(target=worker, args=(gpu,), daemon=True) for gpu in gpus]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if progress:
        progress.close()
    order = {nb.stem: i for i, nb in enumerate(chapters)}
    return sorted(outcomes, key=lambda o: order.get(o.chapter, 0))


def summary(outcomes: list[Outcome], stale: list[str], seconds: float) -> str:
    count = {s: sum(o.status == s for o in outcomes) for s in ("passed", "failed", "skipped")}
    minutes, secs = divmod(int(round(seconds)), 60)
    lines = [
        f"sweep: {count['passed']} passed, {count['failed']} failed, {count['skipped']} skipped (up to date), "
        f"{len(stale)} stale, {minutes}m{secs:02d}s"
    ]
    for o in outcomes:
        if o.status == "failed":
            lines.append(f"  failed {o.chapter}: {o.error}\n         error notebook: {o.notebook}")
    if stale:
        lines.append(f"  stale (sources changed since their last run here): {', '.join(stale)}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------- command line


def add_arguments(parser) -> None:
    parser.add_argument("chapters", nargs="*", metavar="CHAPTER",
                        help="chapters to run: number (01), stem (01_vector_add) or path; default all")
    parser.add_argument("--quick", action="store_true",
                        help="run with size='quick' (smoke-test shapes) instead of the chapter's default 'full'")
    parser.add_argument("--force", action="store_true", help="re-run chapters that are up to date on this GPU")
    parser.add_argument("--gpus", metavar="all|0,1,...",
                        help="one worker per listed GPU ordinal (CUDA_VISIBLE_DEVICES), chapters in parallel")
    parser.add_argument("--reference", action="store_true",
                        help=f"also write each passing executed notebook back into book/ (only on {BOOK_GPU})")
    parser.add_argument("--timeout", type=int, default=None, metavar="S", help="per-cell execution timeout")
    parser.add_argument("--list", action="store_true", help="list chapters and whether each is up to date; run none")


def run(args) -> int:
    chapters = select_chapters(args.chapters)
    if not chapters:
        raise LabError(f"no chapters ({CHAPTER_GLOB}) in {book_dir()}")
    size = "quick" if args.quick else "full"
    gpus = parse_gpus(args.gpus)
    book_gpu = os.environ.get("LABMAGIC_BOOK_GPU", BOOK_GPU)
    if args.reference:
        here = {_slug_for(g) for g in gpus}
        if here != {book_gpu}:
            raise LabError(f"--reference writes the book's outputs, which come from {book_gpu}; this sweep runs on "
                           f"{', '.join(sorted(here))} (set LABMAGIC_BOOK_GPU to change the book's GPU)")
        if args.quick:
            raise LabError("--reference needs the book's full sizes: drop --quick")
    if args.list:
        slug = _slug_for(gpus[0])
        for notebook in chapters:
            state = "up to date" if up_to_date(notebook, slug, size) else "to run"
            print(f"{notebook.stem}: {state} on {slug}")
        return 0
    started = time.monotonic()
    outcomes = sweep(chapters, size=size, inject_size=args.quick, force=args.force, gpus=gpus,
                     timeout=args.timeout, reference=args.reference)
    stale = sorted({c for slug in {o.slug for o in outcomes} for c in stale_chapters(slug)})
    print(summary(outcomes, stale, time.monotonic() - started))
    return 1 if any(o.status == "failed" for o in outcomes) else 0


__all__ = ["BOOK_GPU", "Outcome", "all_chapters", "select_chapters", "sweep", "run_chapter", "up_to_date",
           "stale_chapters", "add_arguments", "run"]
