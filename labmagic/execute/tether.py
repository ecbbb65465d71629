"""``python -m labmagic.execute.tether MODULE ARGS...``: run a Python module as ``python -m MODULE ARGS...`` would,
tied to the process that started it.

A sweep runs each chapter as a papermill child, in a session of its own (see :class:`.papermill_run.Children`). If
the sweep's process dies without a chance to stop it (a Dask worker killed by the OOM killer or lost with its
host), papermill would go on running the chapter, and its kernel with it, for nobody. On Linux the tether asks the
kernel to send SIGTERM to the child when the thread that started it exits (``prctl(PR_SET_PDEATHSIG)``): papermill
dies, and its kernel, which polls its parent (``JPY_PARENT_PID``), exits a second later. The thread that starts a
chapter waits for it, so it exits before the chapter ends only when its process dies. Elsewhere it runs untied.
"""

from __future__ import annotations

import ctypes
import os
import runpy
import signal
import sys

#: The pid of the process that started the tethered child (set by :func:`tethered`).
PARENT_ENV = "LABMAGIC_TETHER_PARENT"
_PR_SET_PDEATHSIG = 1


def tethered(cmd: list[str], env: dict) -> tuple[list[str], dict]:
    """``[python, -m, module, ...]`` as its tethered form, and the environment that names this process."""
    if len(cmd) < 3 or cmd[1] != "-m":
        raise ValueError(f"not a `python -m MODULE` command: {cmd[:3]}")
    return [cmd[0], "-m", __name__, *cmd[2:]], {**env, PARENT_ENV: str(os.getpid())}


def tie_to_parent(parent: int) -> bool:
    """Ask for SIGTERM when the starting thread exits; True where the kernel took the request. Exits at once when
    the parent has already gone (the request came too late to fire)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        tied = libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
    if tied and parent and os.getppid() != parent:
        sys.exit(f"tether: the process that started this one ({parent}) has already exited")
    return tied


def main(argv: list[str]) -> None:
    if not argv:
        sys.exit("usage: python -m labmagic.execute.tether MODULE [ARGS...]")
    tie_to_parent(int(os.environ.pop(PARENT_ENV, "0") or 0))
    module, *args = argv
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
