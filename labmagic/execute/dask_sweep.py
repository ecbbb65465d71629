"""Sweeps on a Dask cluster (``labmagic sweep --scheduler``): one task per (chapter, GPU kind), each run by a worker
of that kind, its results stored here as a sweep on this machine stores them.

A worker advertises two Dask resources: ``GPU=1`` and its kind, ``kind-<gpu slug>=1`` (a worker without a GPU, its
kind alone: ``kind-cpu=1``) (``labmagic cluster worker``
and the commands ``labmagic cluster`` prints set them; ``--scheduler local`` and ``local-cuda`` set them for the
workers they start). A task asks for both, so it only ever lands on (and, when its worker is lost, is retried on)
a worker of its kind, one chapter per GPU at a time. Each worker is also asked which GPU it sees, and a worker
whose advertised kind is not its GPU's stops the sweep before anything runs.

Each task runs the chapter at the driver's commit (:mod:`.checkout`, :mod:`.remote_chapter`) and sends back its
notebook, log, record, rows and plots; the driver writes them on arrival (:func:`.chapter_result.publish`) with
the same resumability (up-to-date (chapter, kind) pairs are skipped), failure records and progress bar as a
local sweep. Dask is an optional dependency: it is imported here, inside the functions that need it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from ..errors import LabError
from ..paths import repo_root
from ..runtime import device_slug, driver_devices
from ..store.manifest import freshness, up_to_date
from .chapter_result import ChapterResult, check_kind, publish
from .checkout import driver_commit
from .papermill_run import Outcome, write_reference
from .parallel import Progress, SweepInterrupted
from .remote_chapter import ChapterTask, run_chapter_on_worker, stop_chapters, worker_identity

LOCAL, LOCAL_CUDA = "local", "local-cuda"

#: A worker's kind resource: ``kind-nvidia-h200``.
KIND_PREFIX = "kind-"

#: Further tries of a task that raised on its worker (a worker lost mid-chapter is Dask's to retry:
#: ``distributed.scheduler.allowed-failures``, 3 by default).
RETRIES = 1

#: Seconds to wait for a scheduler to answer, and for its first worker.
CONNECT_TIMEOUT_S = 20

#: Seconds a kind may have no worker at all before its unfinished chapters fail: Dask would hold them for a worker
#: of that kind forever (a worker that is restarted by its nanny, or by `labmagic cluster worker` again, is back
#: well within it).
ORPHAN_GRACE_S = 120.0
#: How often the driver looks, while it waits for results.
POLL_S = 2.0

#: Workers of ``--scheduler local`` unless ``--workers`` says.
LOCAL_WORKERS = 2


#: The kind of a worker without a GPU: chapters run in CPU mode there.
CPU_KIND = "cpu"


def worker_resources(kind: str) -> dict[str, float]:
    """The resources a worker of ``kind`` advertises, and a task for that kind asks for: ``GPU=1`` and the kind
    (one chapter per GPU at a time); a CPU worker, its kind alone (one chapter at a time), never a GPU it lacks."""
    own = {f"{KIND_PREFIX}{check_kind(kind)}": 1}
    return own if kind == CPU_KIND else {"GPU": 1, **own}


def resources_text(kind: str) -> str:
    """:func:`worker_resources` as ``dask worker --resources`` takes them: ``GPU=1,kind-nvidia-h200=1`` (commas, so
    that it needs no quotes in a shell or a job script)."""
    return ",".join(f"{name}={value:g}" for name, value in worker_resources(kind).items())


def host_gpus() -> list[tuple[str, str]]:
    """(``CUDA_VISIBLE_DEVICES`` entry, kind) of each GPU this host shows; empty without one."""
    devices = driver_devices()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [part.strip() for part in visible.split(",")] if visible else [str(i) for i in range(len(devices))]
    return [(ids[i] if i < len(ids) else str(i), device_slug(name)) for i, (name, *_) in enumerate(devices)]


def local_cluster(workers: int = LOCAL_WORKERS, **kwargs):
    """A ``LocalCluster`` of CPU workers (chapters run in CPU mode: no GPU is visible to them), kind ``cpu``."""
    from distributed import LocalCluster

    if workers < 1:
        raise LabError(f"--workers takes a positive number, not {workers}")
    return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                        resources=worker_resources(CPU_KIND),
                        env={"LABMAGIC_FORCE_CPU": "1", "CUDA_VISIBLE_DEVICES": ""}, **kwargs)


def gpu_worker_cluster(gpus: list[tuple[str, str]]):
    """One plain Dask worker per GPU, each with ``CUDA_VISIBLE_DEVICES`` set to its GPU and that GPU's kind: what
    ``local-cuda`` starts without ``dask-cuda``, or on a host whose GPUs are of several kinds."""
    from distributed import Nanny, Scheduler, SpecCluster

    workers = {f"gpu-{visible or i}": {"cls": Nanny, "options": {
        "nthreads": 1, "env": {"CUDA_VISIBLE_DEVICES": visible}, "resources": worker_resources(kind)}}
        for i, (visible, kind) in enumerate(gpus)}
    return SpecCluster(workers=workers, scheduler={"cls": Scheduler, "options": {"dashboard_address": ":0"}},
                       name="labmagic-local-cuda")


def local_cuda_cluster():
    """One worker per GPU of this host: ``dask_cuda.LocalCUDACluster`` where it is installed, else (saying so)
    :func:`gpu_worker_cluster`."""
    gpus = host_gpus()
    if not gpus:
        raise LabError("--scheduler local-cuda starts one worker per GPU, and this machine has none: use "
                       "--scheduler local")
    kinds = sorted({kind for _, kind in gpus})
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError:
        print("dask_cuda is not installed (pip install 'labmagic[cluster-gpu]'): starting one plain Dask worker "
              "per GPU, CUDA_VISIBLE_DEVICES set for each", file=sys.stderr)
        return gpu_worker_cluster(gpus)
    if len(kinds) > 1:
        print(f"this host's GPUs are of {len(kinds)} kinds ({', '.join(kinds)}): one plain Dask worker per GPU, "
              "each advertising its own", file=sys.stderr)
        return gpu_worker_cluster(gpus)
    return LocalCUDACluster(CUDA_VISIBLE_DEVICES=[visible for visible, _ in gpus], threads_per_worker=1,
                            resources=worker_resources(kinds[0]), dashboard_address=":0")


def check_scheduler(scheduler: str, workers: int | None = None) -> str:
    """``scheduler`` if ``--scheduler`` can use it (with ``--workers``), else a one-line error."""
    if workers is not None and scheduler != LOCAL:
        raise LabError(f"--workers sizes --scheduler local; {scheduler} has the workers it has")
    if scheduler not in (LOCAL, LOCAL_CUDA) and ":" not in scheduler:
        raise LabError(f"--scheduler takes local, local-cuda or a scheduler's address like tcp://host:8786, "
                       f"not {scheduler!r}")
    return scheduler


@contextlib.contextmanager
def connect(scheduler: str, workers: int | None = None) -> Iterator:
    """A ``distributed.Client`` for ``scheduler``: ``local`` (a LocalCluster of CPU workers, ``workers`` of them),
    ``local-cuda`` (one worker per GPU here) or a scheduler's address; a cluster started here ends with it."""
    try:
        from distributed import Client
    except ImportError:
        raise LabError("--scheduler needs Dask: pip install 'labmagic[cluster]' (dask[distributed])") from None
    check_scheduler(scheduler, workers)
    cluster = local_cluster(workers or LOCAL_WORKERS) if scheduler == LOCAL else (
        local_cuda_cluster() if scheduler == LOCAL_CUDA else None)
    try:
        try:
            client = Client(cluster) if cluster is not None else Client(scheduler, timeout=CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            raise LabError(f"no Dask scheduler answers at {scheduler} ({exc}); `labmagic cluster` prints how to "
                           "start one") from None
        try:
            try:
                client.wait_for_workers(1, timeout=CONNECT_TIMEOUT_S)
            except TimeoutError:
                raise LabError(f"the Dask scheduler at {scheduler} has no workers after {CONNECT_TIMEOUT_S} s; "
                               "`labmagic cluster` prints how to start them") from None
            yield client
        finally:
            client.close()
    finally:
        if cluster is not None:
            cluster.close()


def cluster_kinds(client, where: str) -> dict[str, list[str]]:
    """kind -> addresses of the workers that advertise it. A one-line error when none does, or when a worker
    advertises a kind that is not its GPU's (its results would land in the wrong folder)."""
    try:
        identities = client.run(worker_identity)
    except Exception as exc:  # noqa: BLE001 - a worker that cannot import labmagic, typically
        raise LabError(f"the workers of the cluster at {where} could not say what they are "
                       f"({type(exc).__name__}: {' '.join(str(exc).split())}): each needs labmagic installed "
                       "(pip install -e '.[cluster]')") from None
    kinds: dict[str, list[str]] = {}
    others = []
    for address, who in sorted(identities.items()):
        resources = who["resources"]
        advertised = sorted(name[len(KIND_PREFIX):] for name, amount in resources.items()
                            if name.startswith(KIND_PREFIX) and amount >= 1)
        if not advertised or (resources.get("GPU", 0) < 1 and advertised != [CPU_KIND]):
            others.append(address)
            continue
        if advertised != [who["kind"]]:
            raise LabError(f"worker {address} on {who['host']} advertises {', '.join(advertised)} but its GPU is "
                           f"{who['kind']} (CUDA_VISIBLE_DEVICES={who['cuda_visible_devices']}): restart it with "
                           f"--resources {resources_text(who['kind'])}")
        kinds.setdefault(who["kind"], []).append(address)
    if not kinds:
        raise LabError(f"no worker of the cluster at {where} advertises a GPU kind ({len(others)} worker(s) without "
                       f"resources GPU=1 and kind-<gpu>=1, or kind-cpu=1): start them with `labmagic cluster worker`")
    return kinds


def _workers_now(client) -> dict[str, dict]:
    """address -> what the scheduler knows of each worker connected now (its own view: nothing runs on the workers,
    which may be busy)."""
    try:
        info = client.scheduler_info(n_workers=-1)
    except TypeError:  # distributed before n_workers
        info = client.scheduler_info()
    return info.get("workers", {})


def live_kinds(client) -> set[str]:
    """The kinds that at least one worker connected to the scheduler advertises now."""
    kinds = set()
    for worker in _workers_now(client).values():
        for name, amount in (worker.get("resources") or {}).items():
            if name.startswith(KIND_PREFIX) and amount >= 1:
                kinds.add(name[len(KIND_PREFIX):])
    return kinds


def parse_kinds(spec: str | None, kinds: dict[str, list[str]], where: str) -> list[str]:
    """The kinds ``--kinds`` picks from the cluster's: ``all`` (the default) or a comma-separated list."""
    have = ", ".join(f"{kind} ({len(addresses)} worker{'s' if len(addresses) > 1 else ''})"
                     for kind, addresses in sorted(kinds.items()))
    if spec is None or spec.strip() == "all":
        return sorted(kinds)
    wanted = list(dict.fromkeys(part.strip() for part in spec.split(",") if part.strip()))
    if not wanted:
        raise LabError(f"--kinds takes 'all' or GPU kinds like nvidia-h200,nvidia-a100, not {spec!r}")
    for kind in wanted:
        check_kind(kind)
    missing = [kind for kind in wanted if kind not in kinds]
    if missing:
        raise LabError(f"no worker of kind {', '.join(missing)} in the cluster at {where}; it has {have}")
    return wanted


def list_on_cluster(chapters: list[Path], *, scheduler: str, workers: int | None = None, kinds: str | None = None,
                    size: str = "full") -> list[tuple[str, str, bool]]:
    """(chapter, kind, up to date) for each chapter on each kind the cluster has (``--list``)."""
    with connect(scheduler, workers) as client:
        chosen = parse_kinds(kinds, cluster_kinds(client, scheduler), scheduler)
    return [(nb.stem, kind, up_to_date(nb, kind, size)) for nb in chapters for kind in chosen]


def sweep_on_cluster(chapters: list[Path], *, scheduler: str, workers: int | None = None, kinds: str | None = None,
                     size: str = "full", inject_size: bool = False, force: bool = False, timeout: int | None = None,
                     reference: str | None = None, allow_dirty: bool = False, quiet: bool = False) -> list[Outcome]:
    """Run each chapter once per chosen GPU kind of the cluster (skipping the up-to-date pairs); store what comes
    back in ``results/<kind>/``; one outcome per (chapter, kind). ``reference``: the book's GPU, whose passing
    notebooks are also written back into ``book/``."""
    check_scheduler(scheduler, workers)
    commit = driver_commit(repo_root(), allow_dirty=allow_dirty)
    if commit.left_out:
        print(f"--allow-dirty: the workers run commit {commit.short} without the {len(commit.left_out)} "
              f"uncommitted change(s) under book/ and labmagic/ (the records name the commit and what was left out)",
              file=sys.stderr)
    with connect(scheduler, workers) as client:
        available = cluster_kinds(client, scheduler)
        chosen = parse_kinds(kinds, available, scheduler)
        if reference and set(chosen) != {reference}:
            fix = f"add --kinds {reference}" if reference in available else f"the cluster has no {reference} worker"
            raise LabError(f"--reference writes the book's outputs, which come from {reference}; this sweep runs on "
                           f"{', '.join(chosen)}: {fix} (LABMAGIC_BOOK_GPU names the book's GPU)")
        return _Sweep(client, chapters, chosen, commit, size=size, inject_size=inject_size, force=force,
                      timeout=timeout, reference=reference, quiet=quiet, where=scheduler).run()


class _Sweep:
    """One sweep's tasks on a connected cluster: submitting, the progress events, collecting and storing."""

    def __init__(self, client, chapters, kinds, commit, *, size, inject_size, force, timeout, reference, quiet,
                 where):
        self.client, self.chapters, self.kinds, self.commit = client, chapters, kinds, commit
        self.size, self.inject_size, self.force, self.timeout = size, inject_size, force, timeout
        self.reference, self.quiet, self.where = reference, quiet, where
        self.id = f"labmagic-sweep-{uuid.uuid4().hex[:12]}"
        self.lock = threading.Lock()
        self.running: set[str] = set()
        self.tries: dict[str, list[str]] = {}  # label -> the worker of each start of its chapter, in order
        self.done: list[Outcome] = []
        self.progress: Progress | None = None

    def label(self, chapter: str, kind: str) -> str:
        return chapter if len(self.kinds) == 1 else f"{chapter} on {kind}"

    def run(self) -> list[Outcome]:
        outcomes, todo = [], []
        for notebook in self.chapters:
            for kind in self.kinds:
                fresh, why = freshness(notebook, kind, self.size)
                if not self.force and fresh:
                    outcomes.append(Outcome(notebook.stem, "skipped", kind, details={"reason": why}))
                else:
                    todo.append((notebook, kind))
        if not self.quiet:
            self.progress = Progress(len(todo), f"sweep on {self.where}: {', '.join(self.kinds)}")
        futures: dict = {}  # future -> (chapter notebook, kind)
        self.client.subscribe_topic(self.id, self.on_event)
        try:
            try:
                for notebook, kind in todo:
                    task = ChapterTask(notebook.stem, kind, self.commit, self.size, self.inject_size, self.timeout,
                                       self.id)
                    future = self.client.submit(run_chapter_on_worker, task, key=f"{notebook.stem}-{kind}-{self.id}",
                                                resources=worker_resources(kind), retries=RETRIES, pure=False)
                    futures[future] = (notebook, kind)
                outcomes += self.collect(futures)
            except KeyboardInterrupt:
                raise self.stop(futures, outcomes) from None
            except BaseException:  # nothing of this sweep may go on running on the workers
                self.stop(futures, outcomes)
                raise
        finally:
            self.client.unsubscribe_topic(self.id)
            if self.progress:
                self.progress.close()
        order = {nb.stem: i for i, nb in enumerate(self.chapters)}
        return sorted(outcomes, key=lambda o: (order.get(o.chapter, 0), self.kinds.index(o.slug)))

    def collect(self, futures: dict) -> list[Outcome]:
        """Store each task's result as it arrives (into ``self.done`` too, for an interrupt's report). A result
        that is being written when Ctrl-C comes is written whole first. Chapters of a kind that has had no worker
        for :data:`ORPHAN_GRACE_S` fail (nothing written) instead of waiting for one forever."""
        from distributed import wait

        pending = dict(futures)
        orphaned_since: dict[str, float] = {}
        while pending:
            try:
                done = wait(list(pending), timeout=POLL_S, return_when="FIRST_COMPLETED").done
            except TimeoutError:
                done = set()
            for future in [f for f in pending if f in done]:
                notebook, kind = pending.pop(future)
                outcome, interrupted = _shielded(self.outcome, future, notebook, kind)
                self.record(outcome, kind)
                if interrupted:
                    raise KeyboardInterrupt
            if pending:
                self.fail_orphans(pending, orphaned_since)
        return self.done

    def record(self, outcome: Outcome, kind: str) -> None:
        self.done.append(outcome)
        if self.progress:
            self.progress.done(dataclasses.replace(outcome, chapter=self.label(outcome.chapter, kind)))

    def fail_orphans(self, pending: dict, orphaned_since: dict[str, float]) -> None:
        """Fail (and cancel) the pending chapters of each kind that has had no worker for :data:`ORPHAN_GRACE_S`."""
        alive = live_kinds(self.client)
        now = time.monotonic()
        for kind in {kind for _, kind in pending.values()}:
            if kind in alive:
                orphaned_since.pop(kind, None)
                continue
            since = orphaned_since.setdefault(kind, now)
            if now - since < ORPHAN_GRACE_S:
                continue
            lost = [f for f, (_, k) in pending.items() if k == kind]
            self.client.cancel(lost)
            for future in lost:
                notebook, _ = pending.pop(future)
                self.record(Outcome(notebook.stem, "failed", kind,
                                    error=f"no worker of kind {kind} has been on the cluster for "
                                          f"{now - since:.0f} s: its workers were lost (nothing was written)",
                                    details={"reason": "no worker of its kind"}), kind)

    def stop(self, futures: dict, skipped: list[Outcome]) -> SweepInterrupted:
        """After Ctrl-C: cancel what has not finished, stop the sweep's running chapters on their workers (their
        papermill children are interrupted as a local sweep's are, and nothing of theirs is stored)."""
        self.client.cancel(list(futures))
        with contextlib.suppress(Exception):  # a worker that is gone has nothing left running
            self.client.run(stop_chapters, self.id)
        finished = {self.label(o.chapter, o.slug) for o in self.done}
        with self.lock:
            stopped = sorted(self.running - finished)
        left = [self.label(nb.stem, kind) for nb, kind in futures.values()]
        not_started = [label for label in left if label not in finished and label not in stopped]
        return SweepInterrupted(stopped, not_started, skipped + self.done)

    def outcome(self, future, notebook: Path, kind: str) -> Outcome:
        """The outcome of one finished task, its result stored; nothing is stored for a task that raised. Its
        ``details["rerun"]`` says why the chapter ran more than once, where it did."""
        outcome = self._outcome(future, notebook, kind)
        rerun = self.rerun(self.label(notebook.stem, kind))
        if rerun:
            outcome.details["rerun"] = rerun
        return outcome

    def rerun(self, label: str) -> str:
        """Why the chapter ``label`` names started more than once on the cluster ('' when it started once): a worker
        lost mid-chapter (Dask runs the task again elsewhere) or a try that raised (retried, :data:`RETRIES`)."""
        with self.lock:
            tries = list(self.tries.get(label, []))
        if len(tries) < 2:
            return ""
        connected = _workers_now(self.client)
        why = [f"its worker {worker} was lost mid-chapter" if worker not in connected else
               f"its try on {worker} raised" for worker in tries[:-1]]
        return f"ran {len(tries)} times: {'; '.join(why)}; the last try ran on {tries[-1]}"

    def _outcome(self, future, notebook: Path, kind: str) -> Outcome:
        try:
            result: ChapterResult = future.result()
        except Exception as exc:  # noqa: BLE001 - it raised on every try, or its workers kept dying: the chapter failed
            error = " ".join(f"{type(exc).__name__}: {exc}".split())
            return Outcome(notebook.stem, "failed", kind, error=f"{error} (nothing was written)",
                           details={"reason": "the task raised on its worker"})
        details = {"worker": result.worker}
        if result.status == "interrupted":
            return Outcome(notebook.stem, "interrupted", kind, result.seconds, details=details)
        try:
            executed = publish(result)
        except LabError as exc:
            return Outcome(notebook.stem, "failed", kind, result.seconds, f"{exc} (nothing was written)",
                           details=details)
        if self.reference == kind and result.status == "passed":
            write_reference(executed, notebook)
        return Outcome(notebook.stem, result.status, kind, result.seconds, result.error, str(executed),
                       details=details)

    def on_event(self, event) -> None:
        """A worker's progress event (in the client's event loop thread)."""
        _, message = event
        label = self.label(message["chapter"], message["kind"])
        if message["event"] == "start":
            with self.lock:
                self.running.add(label)
                self.tries.setdefault(label, []).append(str(message.get("worker")))
            if self.progress:
                self.progress.start(label)
        elif message["event"] == "cell" and self.progress:
            self.progress.cell(label, message["cell"])


def _shielded(function, *args):
    """``function(*args)`` in a thread of its own, so that Ctrl-C cannot cut it short: (its value, whether Ctrl-C
    came meanwhile). The wait is on an event, in short steps, so the signal is noticed without a broken join."""
    box: dict = {}
    finished = threading.Event()

    def target():
        try:
            box["value"] = function(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc
        finally:
            finished.set()

    threading.Thread(target=target, daemon=True).start()
    interrupted = False
    while True:
        try:
            if finished.wait(0.5):
                break
        except KeyboardInterrupt:
            interrupted = True
    if "error" in box:
        raise box["error"]
    return box["value"], interrupted
