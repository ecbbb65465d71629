"""``labmagic cluster``: how to start a Dask cluster that ``labmagic sweep --scheduler`` can use, and this host's
workers for it.

Each worker serves one GPU and advertises it as Dask resources, ``GPU=1,kind-<gpu>=1`` (``kind-nvidia-h200``), which
is how a sweep's tasks find a GPU of their kind. ``labmagic cluster`` prints the commands (a scheduler, then this
host's workers); ``labmagic cluster worker --scheduler ADDRESS`` starts the workers: ``dask cuda worker`` (one per
GPU) where dask-cuda is installed and the GPUs are of one kind, else one ``dask worker`` per GPU with
``CUDA_VISIBLE_DEVICES`` set; on a host without a GPU, one worker of kind ``cpu``, which advertises ``kind-cpu=1`` alone
(no ``GPU=1``: it has none). ``labmagic cluster resources``
prints the resources alone, for a batch job's worker command (Slurm through dask-jobqueue, see the README). Workers
run chapters in a scratch copy of the driver's commit, taken from their own checkout (``LABMAGIC_ROOT``) or the
driver's when they see it.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import signal
import socket
import subprocess
import sys

from ..errors import LabError

#: The port ``dask scheduler`` listens on by default.
PORT = 8786


def add_arguments(parser) -> None:
    parser.add_argument("action", nargs="?", choices=("print", "worker", "resources"), default="print",
                        help="print: the commands to start a scheduler and this host's workers (default); "
                             "worker: start this host's workers; resources: the --resources of a worker for the GPU "
                             "this process sees (for a batch job's worker command)")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help=f"the scheduler's address (default in the printed commands: tcp://<this host>:{PORT})")
    parser.add_argument("--print", dest="dry_run", action="store_true",
                        help="with worker: print the commands instead of running them")


def worker_commands(scheduler: str) -> list[tuple[dict[str, str], list[str]]]:
    """(environment, ``dask ...`` command) of each worker process this host runs for ``scheduler``."""
    from ..execute.dask_sweep import host_gpus, resources_text

    host = socket.gethostname().split(".")[0]
    gpus = host_gpus()
    if not gpus:
        return [({}, ["dask", "worker", scheduler, "--nthreads", "1", "--resources", resources_text("cpu"),
                      "--name", f"{host}-cpu"])]
    kinds = sorted({kind for _, kind in gpus})
    if len(kinds) == 1 and importlib.util.find_spec("dask_cuda") is not None:
        return [({}, ["dask", "cuda", "worker", scheduler, "--nthreads", "1", "--resources", resources_text(kinds[0])])]
    return [({"CUDA_VISIBLE_DEVICES": visible}, ["dask", "worker", scheduler, "--nthreads", "1", "--resources",
                                                 resources_text(kind), "--name", f"{host}-gpu{visible}"])
            for visible, kind in gpus]


def shell_line(env: dict[str, str], command: list[str]) -> str:
    return " ".join([*(f"{name}={shlex.quote(value)}" for name, value in env.items()), *map(shlex.quote, command)])


def host_resources() -> str:
    """``--resources`` for a worker of the GPU(s) this process sees (one kind), e.g. in a Slurm job's script."""
    from ..execute.dask_sweep import host_gpus, resources_text

    kinds = sorted({kind for _, kind in host_gpus()}) or ["cpu"]
    if len(kinds) > 1:
        raise LabError(f"this process sees GPUs of {len(kinds)} kinds ({', '.join(kinds)}): a worker serves one; "
                       "set CUDA_VISIBLE_DEVICES to its GPU")
    return resources_text(kinds[0])


def run(args) -> int:
    if args.action == "resources":
        print(host_resources())
        return 0
    if args.action == "worker":
        if not args.scheduler:
            raise LabError("labmagic cluster worker needs --scheduler ADDRESS (tcp://host:8786), the scheduler the "
                           "workers join")
        commands = worker_commands(args.scheduler)
        if args.dry_run:
            print("\n".join(shell_line(env, command) for env, command in commands))
            return 0
        return _start(commands)
    if args.dry_run:
        raise LabError("--print goes with `labmagic cluster worker`; `labmagic cluster` only prints")
    scheduler = args.scheduler or f"tcp://{socket.getfqdn()}:{PORT}"
    lines = [
        "# 1. the scheduler, on one host the others reach:",
        f"dask scheduler --port {scheduler.rsplit(':', 1)[-1]}",
        "# 2. this host's workers, one per GPU (or: labmagic cluster worker --scheduler ADDRESS):",
        *(shell_line(env, command) for env, command in worker_commands(scheduler)),
        "# 3. the sweep, from a clean checkout whose commit the workers' checkouts have (or can see):",
        f"labmagic sweep --scheduler {scheduler} --kinds all",
    ]
    print("\n".join(lines))
    return 0


def _start(commands: list[tuple[dict[str, str], list[str]]]) -> int:
    """Run the worker commands until they end; Ctrl-C or SIGTERM closes them (SIGTERM: a worker's clean exit)."""
    if importlib.util.find_spec("distributed") is None:
        raise LabError("labmagic cluster worker needs Dask: pip install 'labmagic[cluster]' (dask[distributed])")
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    procs = []
    try:
        for env, command in commands:
            print(shell_line(env, command), file=sys.stderr)
            procs.append(subprocess.Popen([sys.executable, "-m", *command], env={**os.environ, **env}))
        return max(proc.wait() for proc in procs)
    except KeyboardInterrupt:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt
