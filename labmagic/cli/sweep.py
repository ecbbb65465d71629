"""``labmagic sweep``: execute chapters with papermill on this machine, one GPU per worker.

Each chapter ``book/NN_name.ipynb`` is executed (in its own kernel, with ``book/`` as the working directory) into
``results/<gpu>/notebooks/NN_name.ipynb``, next to the bench CSVs and plots that the chapter writes for that GPU;
without a GPU the slug is ``cpu``. Beside each executed notebook, ``NN_name.json`` records the outcome and the hash of
the chapter's sources (:mod:`labmagic.store.manifest`), and ``NN_name.log`` the cell output. A chapter whose sources
and size preset have not changed since its last successful run on this GPU is skipped unless ``--force``.

Chapters receive papermill parameters through their cell tagged ``parameters``: ``size = "full"`` (the book's
numbers), ``size = "quick"`` (smoke runs, ``--quick``) or another preset a chapter names (``--size smoke``: chapter
09's one shape a race without its ``torch.compile`` rivals). ``--reference`` writes the executed notebook back into
``book/`` (outputs included) on the book's own GPU, which is how the stored outputs that the site shows are made.
``--timer graph`` has every race of the chapters time with the CUDA-graph timer (through the environment every
``%bench`` reads; rows labelled ``cuda_graph`` in their ``timer`` column, replacing the events rows), and the record
notes it, so that the next events sweep runs those chapters again.

Ctrl-C, SIGTERM or SIGHUP stops the running chapters, leaves their previous notebook, log and record as they were
(the next sweep runs them again) and exits with status 130.

``--scheduler`` runs the chapters on a Dask cluster instead, once per GPU kind its workers advertise (``--kinds``),
at this checkout's commit, and stores what comes back here the same way (:mod:`labmagic.execute.dask_sweep`):
``local`` starts a cluster of CPU workers on this machine, ``local-cuda`` one worker per GPU, and an address
(``tcp://host:8786``) joins a running one (``labmagic cluster`` prints how to start it).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from contextlib import contextmanager

from ..errors import LabError
from ..execute.parallel import parse_gpus, slug_for, summary, sweep
from ..magics.bench_magic import SANITIZE_ENV, TIMER_ENV
from ..paths import CHAPTER_GLOB, book_dir, repo_root, select_chapters
from ..store.compare import since_snapshot, snapshot
from ..store.manifest import freshness, stale_chapters

#: The GPU whose outputs the book shows (``--reference`` refuses other devices). ``LABMAGIC_BOOK_GPU`` overrides.
BOOK_GPU = "nvidia-h200"

#: Exit status of an interrupted sweep: the shell's for a command that SIGINT stopped.
INTERRUPTED = 130


def add_arguments(parser) -> None:
    parser.add_argument("chapters", nargs="*", metavar="CHAPTER",
                        help="chapters to run: number (01), stem (01_vector_add) or path; default all")
    parser.add_argument("--quick", action="store_true",
                        help="run with size='quick' (smoke-test shapes) instead of the chapter's default 'full'")
    parser.add_argument("--size", metavar="NAME",
                        help="run with size=NAME, a preset the chapters name in their parameters cell (chapter 09: "
                             "'smoke'); --quick is --size quick")
    parser.add_argument("--force", action="store_true", help="re-run chapters that are up to date on this GPU")
    parser.add_argument("--gpus", metavar="all|0,1,...",
                        help="one worker per listed GPU ordinal (CUDA_VISIBLE_DEVICES), chapters in parallel")
    parser.add_argument("--reference", action="store_true",
                        help=f"also write each passing executed notebook back into book/ (only on {BOOK_GPU})")
    parser.add_argument("--timeout", type=int, default=None, metavar="S", help="per-cell execution timeout")
    parser.add_argument("--list", action="store_true", help="list chapters and whether each is up to date; run none")
    parser.add_argument("--sanitize", action="store_true",
                        help="every %%bench runs its CUDA variants' check under compute-sanitizer memcheck before "
                             f"timing (sets {SANITIZE_ENV}=1 for the chapters; add --force for up-to-date ones)")
    parser.add_argument("--timer", choices=("events", "graph", "nsight"), default="events",
                        help="graph: every race of the chapters times each call that can be captured in a CUDA graph "
                             "(its rows' timer column cuda_graph; the others with events and a note), replacing the "
                             "events rows in the chapters' CSVs; a chapter last run with the other timer is run "
                             "again. nsight: every %%bench also re-times its ok rows under Nsight Compute and saves "
                             "the cross-check (add --force for up-to-date ones). Either sets "
                             f"{TIMER_ENV} for the chapters")
    cluster = parser.add_argument_group("on a Dask cluster (pip install 'labmagic[cluster]')")
    cluster.add_argument("--scheduler", metavar="local|local-cuda|ADDRESS",
                         help="run the chapters on a Dask cluster, once per GPU kind: 'local' (CPU workers here), "
                              "'local-cuda' (one worker per GPU here) or a scheduler's address, tcp://host:8786")
    cluster.add_argument("--kinds", metavar="all|KIND,...",
                         help="GPU kinds of the cluster to run on (default all), e.g. nvidia-h200,nvidia-a100")
    cluster.add_argument("--workers", type=int, metavar="N", help="workers of --scheduler local (default 2)")
    cluster.add_argument("--allow-dirty", action="store_true",
                         help="sweep the commit even though book/ or labmagic/ have uncommitted changes (the "
                              "workers run the commit without them)")


def sweep_size(args) -> str:
    """The size preset the chapters run with: ``--size``, ``quick`` for ``--quick``, else ``full``; a name that is not
    an identifier (it becomes a papermill parameter and part of the run record) is refused."""
    size = getattr(args, "size", None)
    if size is None:
        return "quick" if args.quick else "full"
    if args.quick and size != "quick":
        raise LabError(f"--quick is --size quick: drop one of --quick and --size {size}")
    if not size.isidentifier():
        raise LabError(f"--size {size!r}: a preset's name is a word (full, quick, smoke)")
    return size


def run(args) -> int:
    chapters = select_chapters(args.chapters)
    if not chapters:
        raise LabError(f"no chapters ({CHAPTER_GLOB}) in {book_dir()}")
    size = sweep_size(args)
    book_gpu = os.environ.get("LABMAGIC_BOOK_GPU", BOOK_GPU)
    if args.scheduler:
        if args.sanitize:
            raise LabError("--sanitize runs on this machine's GPUs: drop --scheduler")
        if args.timer != "events":
            raise LabError(f"--timer {args.timer} runs on this machine's GPUs: drop --scheduler")
        return _run_on_cluster(args, chapters, size, book_gpu)
    for option, given in (("--kinds", args.kinds), ("--workers", args.workers is not None),
                          ("--allow-dirty", args.allow_dirty)):
        if given:
            raise LabError(f"{option} is for sweeps on a Dask cluster: add --scheduler local|local-cuda|ADDRESS")
    gpus = parse_gpus(args.gpus)
    rows_timer = "graph" if args.timer == "graph" else "events"  # nsight cross-checks events rows
    if args.reference:
        here = {slug_for(g) for g in gpus}
        if here != {book_gpu}:
            raise LabError(f"--reference writes the book's outputs, which come from {book_gpu}; this sweep runs on "
                           f"{', '.join(sorted(here))} (set LABMAGIC_BOOK_GPU to change the book's GPU)")
        if size != "full":
            raise LabError("--reference needs the book's full sizes: drop --quick or --size")
        if rows_timer != "events":
            raise LabError("--reference writes the book's outputs, whose tables are timed with events: drop "
                           "--timer graph")
    if args.list:
        slug = slug_for(gpus[0])
        for notebook in chapters:
            fresh, why = freshness(notebook, slug, size, rows_timer)
            state = "up to date" if fresh else "to run"
            print(f"{notebook.stem}: {state} on {slug} ({why.removeprefix('up to date: ')})")
        return 0
    if args.sanitize:
        os.environ[SANITIZE_ENV] = "1"  # the chapters' kernels inherit it; Bench.sanitize reads it
    os.environ[TIMER_ENV] = args.timer  # likewise, read by every %bench (timer_from_env, nsight_from_env)
    slugs = sorted({slug_for(g) for g in gpus} - {"cpu"})  # without a GPU nothing is saved, nothing to compare
    before = snapshot(repo_root(), slugs) if slugs else None
    return _finish(lambda: sweep(chapters, size=size, inject_size=size != "full", force=args.force, gpus=gpus,
                                 timeout=args.timeout, reference=args.reference, timer=rows_timer), before)


def _run_on_cluster(args, chapters, size: str, book_gpu: str) -> int:
    from ..execute.dask_sweep import list_on_cluster, sweep_on_cluster  # imports Dask: only for --scheduler

    if args.gpus:
        raise LabError("--gpus picks this machine's GPUs; with --scheduler the cluster's workers are the GPUs "
                       "(--kinds picks their kinds)")
    if args.reference and size != "full":
        raise LabError("--reference needs the book's full sizes: drop --quick or --size")
    if args.list:
        for chapter, kind, fresh in list_on_cluster(chapters, scheduler=args.scheduler, workers=args.workers,
                                                    kinds=args.kinds, size=size):
            print(f"{chapter}: {'up to date' if fresh else 'to run'} on {kind}")
        return 0
    return _finish(lambda: sweep_on_cluster(
        chapters, scheduler=args.scheduler, workers=args.workers, kinds=args.kinds, size=size,
        inject_size=size != "full", force=args.force, timeout=args.timeout,
        reference=book_gpu if args.reference else None, allow_dirty=args.allow_dirty))


def _finish(run_sweep, before: dict | None = None) -> int:
    """Run a sweep; print its summary (or, interrupted, one line) and return the exit status. ``before``: the
    bench CSVs' text before the sweep, to end with the line that compares the re-measured rows with them."""
    started = time.monotonic()
    try:
        with _stop_signals_interrupt():
            outcomes = run_sweep()
    except KeyboardInterrupt as exc:  # a SweepInterrupted says which chapters stopped; a bare one came before any ran
        print(str(exc) or "sweep interrupted before any chapter started", file=sys.stderr)
        return INTERRUPTED
    stale = sorted({c for slug in {o.slug for o in outcomes} for c in stale_chapters(slug)})
    print(summary(outcomes, stale, time.monotonic() - started))
    if before is not None:
        print(since_snapshot(repo_root(), before, {(o.slug, o.chapter) for o in outcomes if o.status == "passed"}))
    return 1 if any(o.status == "failed" for o in outcomes) else 0


@contextmanager
def _stop_signals_interrupt():
    """SIGTERM and SIGHUP stop a sweep the way Ctrl-C does. Its papermill children run in sessions of their own
    (:class:`labmagic.execute.papermill_run.Children`), so a sweep that such a signal ended outright would leave them
    running. A signal already ignored (``nohup``) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, _raise_interrupt)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt
