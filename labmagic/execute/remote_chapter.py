"""What a Dask worker does for a cluster sweep: run one chapter at the driver's commit on its GPU, and send back
what the run wrote (:class:`labmagic.execute.chapter_result.ChapterResult`).

The task (:func:`run_chapter_on_worker`) extracts the commit into a scratch checkout under the worker's local
directory, runs the chapter there with :func:`labmagic.execute.papermill_run.run_chapter` (``LABMAGIC_ROOT``
pointing at the scratch checkout, which the papermill child and its kernel inherit, and the commit's ``labmagic``
first on ``PYTHONPATH``), packs the result and deletes the scratch checkout. The worker's GPU is the first one its
``CUDA_VISIBLE_DEVICES`` shows (``dask cuda worker`` lists them all, its own first; ``labmagic cluster worker`` and
the plain workers of ``local-cuda`` show one), and the chapter sees that one only, as in ``sweep --gpus``.

A driver stopped by Ctrl-C calls :func:`stop_chapters` on every worker: it interrupts the sweep's running
papermill children the way a local sweep does, and waits for their tasks to clean up.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import LabError
from ..paths import repo_root
from ..runtime import device_slug
from .chapter_result import ChapterResult, clear, pack
from .checkout import Commit, find_clone, materialise
from .papermill_run import STOP_GRACE_S, Children, run_chapter


@dataclass(frozen=True)
class ChapterTask:
    """One chapter on one kind of GPU, as the driver submits it."""

    chapter: str
    kind: str
    commit: Commit
    size: str
    inject_size: bool
    timeout: int | None
    sweep: str  # the sweep's id, also the topic its progress events go to


#: One chapter at a time in a worker process: a run points this process's LABMAGIC_ROOT at its scratch checkout.
_ONE_AT_A_TIME = threading.Lock()
_LOCK = threading.Lock()
_RUNNING: dict[str, list[tuple[str, Children]]] = {}  # sweep -> (chapter, its papermill children) running here
_STOPPED: set[str] = set()  # sweeps whose driver said stop: their tasks that start later do not run


def worker_identity(dask_worker=None) -> dict:
    """What a worker is (for ``Client.run``): the resources it advertises, the GPU kind it sees under its own
    ``CUDA_VISIBLE_DEVICES``, its host."""
    state = getattr(dask_worker, "state", dask_worker)
    return {
        "resources": dict(getattr(state, "total_resources", None) or {}),
        "kind": device_slug(),
        "host": socket.gethostname(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }


def run_chapter_on_worker(task: ChapterTask) -> ChapterResult:
    """Run ``task``'s chapter here at its commit; what the run wrote comes back (nothing is written here but the
    scratch checkout, which is deleted). Raises when the chapter cannot run here at all (wrong GPU, no clone with
    the commit, no such chapter in it): the driver then records the chapter failed and writes nothing."""
    worker = _this_worker()
    address = worker.address if worker is not None else socket.gethostname()
    here = device_slug()
    if here != task.kind:
        raise LabError(f"worker {address} was sent a chapter for {task.kind} but its GPU is {here} "
                       f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')}): its kind-* resource is wrong")
    with _ONE_AT_A_TIME:
        children = Children()
        if not _register(task.sweep, task.chapter, children):
            return ChapterResult(task.chapter, task.kind, "interrupted", worker=address)
        try:
            clone = find_clone(task.commit.sha, [repo_root(), task.commit.path])  # this worker's checkout first
            local = getattr(worker, "local_directory", None)
            scratch = Path(tempfile.mkdtemp(prefix=f"labmagic-{task.chapter}-", dir=local))
            try:
                return _run_in(scratch, clone, task, children, worker, address)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
        finally:
            _unregister(task.sweep, task.chapter, children)


def _run_in(scratch: Path, clone: Path, task: ChapterTask, children: Children, worker, address: str) -> ChapterResult:
    materialise(task.commit, clone, scratch, results_of=task.kind)
    notebook = scratch / "book" / f"{task.chapter}.ipynb"
    if not notebook.is_file():
        raise LabError(f"book/{task.chapter}.ipynb is not in commit {task.commit.short}: commit it (a sweep on a "
                       "cluster runs the driver's commit)")
    python_path = os.pathsep.join(p for p in (str(scratch), os.environ.get("PYTHONPATH", "")) if p)
    env = {"LABMAGIC_ROOT": str(scratch), "LABMAGIC_GIT_COMMIT": task.commit.short, "PYTHONPATH": python_path}
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible and "," in visible:  # dask-cuda shows a worker every GPU, its own first: the chapter sees its own only
        env["CUDA_VISIBLE_DEVICES"] = visible.split(",")[0].strip()
    with _environment(**env):
        clear(task.chapter, task.kind)
        _emit(worker, task, "start")
        outcome = run_chapter(notebook, task.kind, task.size, inject_size=task.inject_size, timeout=task.timeout,
                              on_cell=lambda _chapter, index: _emit(worker, task, "cell", index), children=children)
        where = {"commit": task.commit.sha, "worker": address, "host": socket.gethostname(),
                 "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
        if task.commit.left_out:
            where["left_out"] = list(task.commit.left_out)  # the driver's uncommitted changes, not in this run
        result = pack(task.chapter, task.kind, outcome.status, seconds=outcome.seconds, error=outcome.error,
                      worker=address, extra=where)
    # Paths in messages name the scratch checkout, which is about to go: name the driver's instead.
    result.error = result.error.replace(str(scratch), task.commit.path)
    if result.record:
        result.record["error"] = str(result.record.get("error", "")).replace(str(scratch), task.commit.path)
    return result


async def stop_chapters(sweep: str) -> list[str]:
    """Stop ``sweep``'s chapters on this worker (for ``Client.run`` after the driver's Ctrl-C): interrupt their
    papermill children, keep its later tasks from starting, and wait for the running ones to end (killing what
    has not after the grace period). Returns the chapters that were running."""
    with _LOCK:
        _STOPPED.add(sweep)
        running = list(_RUNNING.get(sweep, []))
    for _chapter, children in running:
        children.interrupt()
    deadline = time.monotonic() + 2 * STOP_GRACE_S
    while _RUNNING.get(sweep) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    for _chapter, children in list(_RUNNING.get(sweep, [])):
        children.kill()
    return [chapter for chapter, _ in running]


def _register(sweep: str, chapter: str, children: Children) -> bool:
    with _LOCK:
        if sweep in _STOPPED:
            return False
        _RUNNING.setdefault(sweep, []).append((chapter, children))
        return True


def _unregister(sweep: str, chapter: str, children: Children) -> None:
    with _LOCK:
        running = _RUNNING.get(sweep, [])
        if (chapter, children) in running:
            running.remove((chapter, children))
        if not running:
            _RUNNING.pop(sweep, None)


def _this_worker():
    """The Dask worker running this task, or None (called outside one, as in a test)."""
    try:
        from distributed import get_worker

        return get_worker()
    except (ImportError, ValueError):
        return None


def _emit(worker, task: ChapterTask, event: str, cell: int | None = None) -> None:
    """A progress event for the driver's bar (the sweep's topic)."""
    if worker is not None:
        worker.log_event(task.sweep, {"event": event, "chapter": task.chapter, "kind": task.kind, "cell": cell,
                                      "worker": worker.address})


@contextlib.contextmanager
def _environment(**values: str) -> Iterator[None]:
    """Set environment variables of this process for the duration (one chapter at a time holds them)."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
