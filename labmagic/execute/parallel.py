"""Many chapters at once: one worker thread per GPU (``--gpus``), each running chapters with papermill, a progress
bar over them, and the sweep's closing summary."""

from __future__ import annotations

import queue
import sys
import threading
from pathlib import Path

from ..errors import LabError
from ..runtime import device_slug, driver_devices, gpu_name
from ..store.manifest import up_to_date
from .papermill_run import Outcome, run_chapter, write_reference


def parse_gpus(spec: str | None) -> list[str | None]:
    """Worker GPU ordinals: ``None`` (one worker, environment untouched), ``all``, or ``0,1`` (repeats allowed)."""
    if spec is None:
        return [None]
    if spec == "all":
        count = len(driver_devices())
        return [str(i) for i in range(count)] or [None]
    gpus = [part.strip() for part in spec.split(",") if part.strip()]
    if not gpus or not all(g.isdigit() for g in gpus):
        raise LabError(f"--gpus takes 'all' or a comma-separated list of GPU ordinals, not {spec!r}")
    return gpus


def slug_for(gpu: str | None) -> str:
    if gpu is None:
        return device_slug()
    name = gpu_name(int(gpu))
    return device_slug(name) if name else device_slug()


class Progress:
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
    todo: queue.Queue[Path] = queue.Queue()
    slugs = {gpu: slug_for(gpu) for gpu in gpus}
    for notebook in chapters:
        slug = slugs[gpus[0]]
        if not force and all(up_to_date(notebook, s, size) for s in set(slugs.values())):
            outcomes.append(Outcome(notebook.stem, "skipped", slug, details={"reason": "up to date"}))
        else:
            todo.put(notebook)
    progress = Progress(todo.qsize(), f"sweep {', '.join(sorted(set(slugs.values())))}") if not quiet else None
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

