"""One chapter executed with papermill in a child process, its log, and its record in the sweep manifest.

The chapter runs into ``results/<gpu>/notebooks/<chapter>.ipynb`` with its output in ``<chapter>.log`` beside it;
its record (:mod:`labmagic.store.manifest`) says how it ended. While it runs, papermill writes into hidden
temporaries beside those (``.<chapter>.*.ipynb``, ``.<chapter>.*.log``). Only a run that ends, passed or failed,
publishes, and only once everything is written: the notebook must be one (nbformat reads it: a full disk or a kill
leaves papermill's file cut short), the log whole, the record written beside them; then the three are renamed into
place. Anything short of that (an interrupt, a full disk, a kill) publishes nothing, so the previous notebook, log
and record stay as they were, and no record vouches for a file that is not a notebook. An interrupted run (a sweep
stopped by Ctrl-C or by its time limit on a lent GPU) keeps what it did get to, apart from the published files:
papermill saves after every cell, so its notebook up to the cell that was running, and its log, move to
``results/<gpu>/interrupted/`` (the rows its races already wrote are in the CSV; this is the notebook that shows
their checks and tables), replaced by the next interrupted run of that chapter and vouched for by no record.
``labmagic sweep`` (:mod:`labmagic.cli.sweep`) runs many of these, one worker per GPU
(:mod:`labmagic.execute.parallel`).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ..paths import repo_root, results_dir, staged_write
from ..runtime import gpu_name
from ..store.fingerprint import chapter_hash, write_notebook
from ..store.manifest import (
    RUN_ROWS_ENV,
    content_hash,
    host_seconds,
    manifest_path,
    manifest_text,
    notebook_problem,
    variant_counts,
)
from .tether import tethered

_CELL_LINE = re.compile(r"Executing Cell (\d+)")
_ERROR_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Interrupt)\b.*)$")

#: Seconds an interrupted papermill gets to shut its kernel down (it takes well under one) before it is killed.
STOP_GRACE_S = 10.0


@dataclass
class Outcome:
    """What happened to one chapter in one sweep."""

    chapter: str
    status: str  # passed | failed | skipped | interrupted
    slug: str
    seconds: float = 0.0
    error: str = ""
    notebook: str = ""
    gpu: str | None = None
    details: dict = field(default_factory=dict)


class Children:
    """The papermill processes of one sweep, so that an interrupt reaches each of them once, and their kernels.

    Each child starts in a session of its own: a terminal's Ctrl-C then reaches the sweep alone, which passes one
    SIGINT on. On SIGINT papermill shuts its kernel down; a second SIGINT during that shutdown (what a shared
    process group gets when the sweep forwards the terminal's) can cut it short and orphan the kernel. The kernel
    sits in a session of its own too, out of reach of a signal to papermill's group, so its group is remembered
    and killed should it outlive papermill.
    """

    def __init__(self):
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._running: dict[subprocess.Popen, set[int]] = {}  # child -> process groups of its descendants

    def spawn(self, cmd: list[str], **kwargs) -> subprocess.Popen | None:
        """Start ``cmd`` in a session of its own; None once the sweep is stopping."""
        with self._lock:  # a child started while interrupt() runs would miss its signal
            if self.stopping.is_set():
                return None
            proc = subprocess.Popen(cmd, start_new_session=True, **kwargs)
            self._running[proc] = set()
            return proc

    def interrupt(self) -> None:
        """Stop starting children and send SIGINT to the running ones (papermill then shuts its kernel down)."""
        with self._lock:
            self.stopping.set()
            for proc, groups in self._running.items():
                groups.update(_descendant_groups(proc.pid))
                _signal_group(proc.pid, signal.SIGINT)

    def kill(self) -> None:
        """SIGKILL what an interrupt did not stop: each running child's process group and its descendants'."""
        with self._lock:
            for proc, groups in self._running.items():
                groups.update(_descendant_groups(proc.pid))
                for group in {proc.pid, *groups}:
                    _signal_group(group, signal.SIGKILL)

    def reap(self, proc: subprocess.Popen) -> int:
        """Wait for an interrupted child, killing it after :data:`STOP_GRACE_S`."""
        try:
            return proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self.kill()
            return proc.wait()

    def finished(self, proc: subprocess.Popen) -> None:
        """Forget an exited child; after an interrupt, kill its descendants that outlived it (a kernel left running
        would go on writing into results/)."""
        with self._lock:
            groups = self._running.pop(proc, set())
        if self.stopping.is_set():
            for group in groups:
                _signal_group(group, signal.SIGKILL)


def _signal_group(group: int, signum: int) -> None:
    if group == os.getpgrp():  # never ourselves
        return
    try:
        os.killpg(group, signum)
    except (ProcessLookupError, PermissionError):
        pass  # already gone


def _descendant_groups(pid: int) -> set[int]:
    """Process groups of ``pid``'s descendants other than its own, from ``/proc`` (none where there is none)."""
    parent_of, group_of = {}, {}
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return set()
    for name in entries:
        try:
            stat = Path("/proc", name, "stat").read_text()
        except OSError:
            continue  # exited meanwhile
        fields = stat.rpartition(")")[2].split()  # after the command name, which may hold spaces and parentheses
        parent_of[int(name)], group_of[int(name)] = int(fields[1]), int(fields[2])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parent_of.items() if parent in frontier and child not in found}
        found |= frontier
    return {group_of[child] for child in found} - {pid}


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
                timeout: int | None = None, on_cell=None, children: Children | None = None,
                timer: str = "events") -> Outcome:
    """Execute one chapter with papermill in a child process; when it ends, publish its notebook and log next to
    each other and record the outcome (see the module docstring), with ``timer``, the timer the chapter's races were
    asked to use (``labmagic sweep --timer graph`` asks it of every ``%bench`` through the environment). Interrupted
    (``children`` stopping, or Ctrl-C here), or unable to write all of them, it publishes nothing."""
    children = children or Children()
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
    running_notebook, running_log = _temporary(output), _temporary(log_path)
    running_rows = _temporary(output.with_suffix(".rows"))  # what the chapter's races found (manifest.note_rows)
    env[RUN_ROWS_ENV] = str(running_rows)
    temporaries = [running_notebook, running_log, running_rows]
    try:
        cmd = papermill_command(notebook, running_notebook, size if inject_size else None, timeout)
        try:
            code, last_error, log_error = _execute(cmd, env, notebook, running_log, children, on_cell)
        except KeyboardInterrupt:
            keep_interrupted(running_notebook, running_log, slug, notebook.name)
            raise
        seconds = time.monotonic() - started
        if children.stopping.is_set():
            kept = keep_interrupted(running_notebook, running_log, slug, notebook.name)
            return Outcome(notebook.stem, "interrupted", slug, seconds, gpu=gpu, notebook=str(kept or ""))
        status = "passed" if code == 0 else "failed"
        error = "" if code == 0 else (last_error or f"papermill exited with status {code}; see {log_path}")
        record = {
            "chapter": notebook.stem, "status": status, "size": size, "timer": timer, "input_hash": input_hash,
            "started": when,
            "seconds": round(seconds, 2), "error": error, "device": slug,
            "gpu_name": gpu_name(int(gpu)) if gpu else gpu_name(), "cuda_visible_devices": gpu,
            "python": sys.version.split()[0], "variants": variant_counts(running_rows),
            # the wall time of the rows' host figures (one eager call's host time and isolated latency): their cost
            "host_figures_seconds": round(host_seconds(running_rows), 2),
        }
        if log_error:
            return _unpublished(notebook, slug, seconds, gpu, f"could not write its log ({_why(log_error)})")
        staged = []  # (temporary, final), renamed into place only once all are written
        if running_notebook.stat().st_size:  # papermill can fail before it writes one: keep the previous one then
            executed = running_notebook.read_bytes()
            problem = notebook_problem(executed)
            if problem:
                cause = last_error or f"papermill exited with status {code}"
                return _unpublished(notebook, slug, seconds, gpu, f"{cause}; what it wrote is not a notebook "
                                                                  f"({problem})")
            record["notebook_hash"] = content_hash(executed)
            staged.append((running_notebook, output))
        staged.append((running_log, log_path))
        record_path = manifest_path(slug, notebook.stem)
        try:
            for temporary, _ in staged:
                _settle(temporary)
            temporaries.append(staged_write(record_path, manifest_text(record)))
        except OSError as exc:
            return _unpublished(notebook, slug, seconds, gpu, f"could not store its notebook, log and record "
                                                              f"({_why(exc)})")
        staged.append((temporaries[-1], record_path))
        for temporary, final in staged:  # the record last: it never vouches for files that are not in place
            os.replace(temporary, final)
    finally:
        for temporary in temporaries:
            temporary.unlink(missing_ok=True)
    return Outcome(notebook.stem, status, slug, seconds, error, str(output), gpu)


def keep_interrupted(running_notebook: Path, running_log: Path, slug: str, name: str) -> Path | None:
    """Move an interrupted run's notebook (as far as papermill saved it) and log to ``results/<slug>/interrupted/``;
    return the notebook's new path, or None when there is no readable notebook to keep (nothing is moved then)."""
    try:
        executed = running_notebook.read_bytes()
        if not executed or notebook_problem(executed):
            return None
        folder = results_dir(slug) / "interrupted"
        folder.mkdir(parents=True, exist_ok=True)
        kept = folder / name
        _settle(running_notebook)
        os.replace(running_notebook, kept)
        if running_log.exists():
            _settle(running_log)
            os.replace(running_log, kept.with_suffix(".log"))
        return kept
    except OSError:  # a best effort beside the published run: never a reason for the sweep to fail
        return None


def _unpublished(notebook: Path, slug: str, seconds: float, gpu: str | None, why: str) -> Outcome:
    """A run that ended but could not be published whole: failed, and nothing of it stored."""
    return Outcome(notebook.stem, "failed", slug, seconds,
                   f"{why}: nothing published, the previous notebook, log and record are kept", gpu=gpu)


def _why(exc: OSError) -> str:
    return f"{type(exc).__name__}: [Errno {exc.errno}] {exc.strerror}" if exc.strerror else str(exc)


def _temporary(final: Path) -> Path:
    """A new hidden file beside ``final``, with its suffix (papermill wants ``.ipynb``)."""
    fd, name = tempfile.mkstemp(prefix=f".{final.stem}.", suffix=final.suffix, dir=final.parent)
    os.close(fd)
    return Path(name)


def _settle(temporary: Path) -> None:
    """A finished temporary ready to move into place: flushed to disk, readable by everyone (results are shared)."""
    with open(temporary, "rb") as handle:
        os.fsync(handle.fileno())
    os.chmod(temporary, 0o644)


def _execute(cmd: list[str], env: dict, notebook: Path, log_path: Path, children: Children,
             on_cell) -> tuple[int | None, str, OSError | None]:
    """Run papermill, copying its output into ``log_path``: (exit status, last error line in the output, the error
    that stopped the log being written, if one did). Papermill runs to its end either way (on a full disk it fails
    at its next save), so no child is left behind."""
    cmd, env = tethered(cmd, env)  # papermill dies with this process, however it dies
    log = open(log_path, "w", encoding="utf-8", buffering=1)  # by line: `tail -f` can follow a run
    proc = children.spawn(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                          cwd=str(notebook.parent))
    if proc is None:
        _close(log)
        return None, "", None
    last_error = ""
    log_error = None
    try:
        for line in proc.stdout:  # ends when papermill and its kernel have both exited
            if log_error is None:
                try:
                    log.write(line)
                except OSError as exc:
                    log_error = exc
            cell = _CELL_LINE.search(line)
            if cell and on_cell:
                on_cell(notebook.stem, int(cell.group(1)))
            err = _ERROR_LINE.match(line)
            if err:
                last_error = err.group(1).strip()
        return proc.wait(), last_error, log_error or _close(log)
    except KeyboardInterrupt:  # only in the main thread, where a sweep's workers never are: stop the child first
        children.interrupt()
        children.reap(proc)
        raise
    finally:
        _close(log)
        proc.stdout.close()
        children.finished(proc)


def _close(log) -> OSError | None:
    """Close ``log``; the error its last write raises (a full disk), if one does."""
    try:
        log.close()
    except OSError as exc:
        return exc
    return None


def write_reference(executed: Path, target: Path) -> None:
    """Copy an executed notebook into ``book/`` without papermill's per-run timing metadata (smaller diffs), with
    the kernel metadata that JupyterLab writes (:func:`normalise_kernel_metadata`)."""
    nb = without_run_metadata(json.loads(executed.read_text(encoding="utf-8")))
    normalise_kernel_metadata(nb)
    write_notebook(target, nb)


def without_run_metadata(nb: dict) -> dict:
    """``nb`` (changed in place, and returned) without papermill's per-run metadata: timings, and the absolute paths
    of the notebook it read and wrote, which name folders of the machine that ran it."""
    nb.get("metadata", {}).pop("papermill", None)
    for cell in nb.get("cells", []):
        meta = cell.get("metadata", {})
        meta.pop("papermill", None)
        meta.pop("execution", None)
    return nb


def normalise_kernel_metadata(nb: dict) -> dict:
    """``nb`` (changed in place, and returned) with the ``kernelspec`` metadata that JupyterLab writes when the
    notebook's kernel connects: the installed kernel spec's display name and language.

    JupyterLab marks a notebook modified when that write changes it. Papermill keeps whatever ``kernelspec`` the
    chapter had ("Python 3"), while ipykernel's spec says "Python 3 (ipykernel)", so every chapter opened modified.
    ``language_info`` needs nothing here: nbclient already wrote the executing kernel's, which is JupyterLab's too
    where the reader runs the same Python (labmagic's JupyterLab extension forgives another Python's version).
    """
    spec = nb.get("metadata", {}).get("kernelspec")
    if not spec or not spec.get("name"):
        return nb
    try:
        from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
    except ImportError:  # no Jupyter here: nothing says what JupyterLab would write
        return nb
    try:
        installed = KernelSpecManager().get_kernel_spec(spec["name"])
    except NoSuchKernel:
        return nb
    # nbformat's key order (sorted), so a re-written notebook differs from the last one only where it changed.
    nb["metadata"]["kernelspec"] = {"display_name": installed.display_name, "language": installed.language,
                                    "name": spec["name"]}
    return nb
