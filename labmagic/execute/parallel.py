"""Many chapters at once: one worker thread per GPU (``--gpus``), each running chapters with papermill, a progress
bar over them, and the sweep's closing summary.

Ctrl-C (a KeyboardInterrupt, which only the main thread receives) stops a sweep in order: the main thread sends
each running papermill one SIGINT, waits for the workers to see their chapters end and discard them (killing what
has not stopped after a grace period), and only then raises :class:`SweepInterrupted`. A worker cut off mid-write
is what would leave a half-written notebook behind.
"""

from __future__ import annotations

import contextlib
import queue
import sys
import threading
import time
from pathlib import Path

from ..errors import LabError
from ..runtime import device_slug, driver_devices, gpu_name
from ..store.manifest import freshness
from .papermill_run import STOP_GRACE_S, Children, Outcome, run_chapter, write_reference


class SweepInterrupted(KeyboardInterrupt):
    """A sweep stopped by Ctrl-C once its running chapters had stopped; their previous results stand untouched."""

    def __init__(self, interrupted: list[str], not_started: list[str], outcomes: list[Outcome],
                 kept: list[str] | None = None):
        self.interrupted, self.not_started, self.outcomes = interrupted, not_started, outcomes
        self.kept = kept or []  # the interrupted runs' notebooks as far as they got (papermill_run.keep_interrupted)
        super().__init__(interrupted, not_started)

    def __str__(self) -> str:
        stopped = ", ".join(self.interrupted) or "no chapter was running"
        return (f"sweep interrupted: {stopped} (previous notebook, log and record kept); "
                f"{len(self.not_started)} chapter(s) not started, {len(self.outcomes)} finished"
                + (f"; what ran before the stop: {', '.join(self.kept)}" if self.kept else ""))


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
                if outcome.status != "interrupted":  # an interrupted chapter is still to run
                    self.bar.update(1)
            else:
                print(line, file=sys.stderr)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def sweep(chapters: list[Path], *, size: str = "full", inject_size: bool = False, force: bool = False,
          gpus: list[str | None] = (None,), timeout: int | None = None, reference: bool = False,
          quiet: bool = False, timer: str = "events") -> list[Outcome]:
    """Run chapters (skipping those up to date), one worker per entry of ``gpus``; return one outcome per chapter.
    ``timer``: what the chapters' races time with (``events`` or ``graph``), for their records and freshness; the
    caller tells the chapters (``labmagic sweep`` sets the environment variable ``%bench`` reads)."""
    outcomes: list[Outcome] = []
    todo: queue.Queue[Path] = queue.Queue()
    slugs = {gpu: slug_for(gpu) for gpu in gpus}
    for notebook in chapters:
        slug = slugs[gpus[0]]
        verdicts = [freshness(notebook, s, size, timer) for s in sorted(set(slugs.values()))]
        if not force and all(fresh for fresh, _ in verdicts):
            outcomes.append(Outcome(notebook.stem, "skipped", slug, details={"reason": verdicts[0][1]}))
        else:
            todo.put(notebook)
    progress = Progress(todo.qsize(), f"sweep {', '.join(sorted(set(slugs.values())))}") if not quiet else None
    lock = threading.Lock()
    children = Children()
    running: dict[str, str | None] = {}  # chapter -> its worker's GPU, while it runs

    def worker(gpu: str | None):
        while not children.stopping.is_set():
            try:
                notebook = todo.get_nowait()
            except queue.Empty:
                return
            with lock:
                running[notebook.stem] = gpu
            if progress:
                progress.start(notebook.stem)
            try:
                outcome = run_chapter(notebook, slugs[gpu], size, inject_size=inject_size, gpu=gpu,
                                      timeout=timeout, on_cell=progress.cell if progress else None, children=children,
                                      timer=timer)
                if reference and outcome.status == "passed":
                    write_reference(Path(outcome.notebook), notebook)
            except Exception as exc:  # noqa: BLE001 - one chapter's failure must not stop the others
                outcome = Outcome(notebook.stem, "failed", slugs[gpu], error=f"{type(exc).__name__}: {exc}", gpu=gpu)
            if progress:
                progress.done(outcome)
            with lock:
                outcomes.append(outcome)
                running.pop(notebook.stem, None)

    crew = _Crew(worker, gpus)
    try:
        crew.start()
        crew.wait()
    except KeyboardInterrupt:
        _stop(children, crew)
        with lock:
            stopped = [o.chapter for o in outcomes if o.status == "interrupted"] + list(running)
            finished = [o for o in outcomes if o.status != "interrupted"]
            kept = [o.notebook for o in outcomes if o.status == "interrupted" and o.notebook]
        raise SweepInterrupted(stopped, [nb.stem for nb in _drain(todo)], finished, kept) from None
    finally:
        if progress:
            progress.close()
    order = {nb.stem: i for i, nb in enumerate(chapters)}
    return sorted(outcomes, key=lambda o: order.get(o.chapter, 0))


class _Crew:
    """Worker threads, one per argument, that the main thread waits for on an event rather than with
    ``Thread.join``: a join that Ctrl-C interrupts marks a thread that is still running as ended (CPython before
    3.13), and nothing would wait for that worker to put its chapter away.

    Daemon threads only so that a worker stuck past the kill (a grandchild holding its pipe) cannot hang the exit.
    """

    def __init__(self, target, args: list):
        self._left = len(args)
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(target, arg), daemon=True) for arg in args]

    def _run(self, target, arg):
        try:
            target(arg)
        finally:
            with self._lock:
                self._left -= 1
                if not self._left:
                    self._done.set()

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds (None: however long) for every worker to end; whether they all did."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._done.is_set():  # short waits: a signal's handler runs between them at the latest
            left = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
            if left <= 0:
                return False
            self._done.wait(left)
        return True


def _stop(children: Children, crew: _Crew) -> None:
    """Interrupt the running chapters and wait for their workers; kill what is still running after the grace
    period, or at once on a second Ctrl-C."""
    children.interrupt()
    try:
        if crew.wait(STOP_GRACE_S):
            return
    except KeyboardInterrupt:
        pass
    children.kill()
    with contextlib.suppress(KeyboardInterrupt):  # a third Ctrl-C: stop waiting for a worker that is stuck
        crew.wait(STOP_GRACE_S)


def _drain(todo: queue.Queue) -> list[Path]:
    left = []
    while True:
        try:
            left.append(todo.get_nowait())
        except queue.Empty:
            return left


def summary(outcomes: list[Outcome], stale: list[str], seconds: float) -> str:
    count = {s: sum(o.status == s for o in outcomes) for s in ("passed", "failed", "skipped")}
    minutes, secs = divmod(int(round(seconds)), 60)
    lines = [
        f"sweep: {count['passed']} passed, {count['failed']} failed, {count['skipped']} skipped (up to date), "
        f"{len(stale)} stale, {minutes}m{secs:02d}s"
    ]
    for o in outcomes:
        if o.status == "failed":  # one that raised before papermill ran has no notebook to show
            notebook = f"\n         error notebook: {o.notebook}" if o.notebook else ""
            lines.append(f"  failed {o.chapter}: {o.error}{notebook}")
        elif o.status == "skipped":  # each one named, with why: `--force` runs it anyway
            lines.append(f"  skipped {o.chapter}: {o.details.get('reason', 'up to date')} (--force runs it)")
    for o in outcomes:
        if o.details.get("rerun"):  # a sweep on a Dask cluster: a worker lost mid-chapter, a try that raised
            lines.append(f"  re-run {o.chapter}: {o.details['rerun']}")
    if stale:
        lines.append(f"  stale (sources changed since their last run here): {', '.join(stale)}")
    return "\n".join(lines)

