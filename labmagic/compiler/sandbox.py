"""NVRTC in a child process with a time limit and a memory limit, so that a runaway compile cannot take the notebook
with it.

A template that instantiates without end once held 12 GB after 95 s, and Ctrl-C waited for NVRTC to return: the
call is C++ that Python cannot stop. In a child (:mod:`.nvrtc_worker`) it can be stopped: the child's address space
is capped (``LABMAGIC_NVRTC_MEMORY_GB``, default 8) and the parent kills it at the time limit
(``LABMAGIC_NVRTC_TIMEOUT_S``, default 300) or at once on Ctrl-C, and says which limit ended the compile.

The child stays warm between compiles: starting one costs about 0.2 s (an interpreter, cuda.bindings and NVRTC's
first program, which the first compile in the notebook's own process paid as well), several times a small
kernel's compile; a warm one adds about a millisecond. A child that was killed, died, or grew past half its limit
is replaced at the next compile.
"""

from __future__ import annotations

import atexit
import math
import os
import pickle
import select
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from ..errors import CompileError, LabError
from . import nvrtc_worker
from .nvrtc_worker import FRAME, write_message

DEFAULT_TIMEOUT_S = 300.0
DEFAULT_MEMORY_GB = 8.0
#: Below this the child cannot even load NVRTC (Python, cuda.bindings and libnvrtc map about 0.3 GiB).
MIN_MEMORY_GB = 0.5
_GIB = 1 << 30
#: A failed compile whose peak came this close to the cap ran into it (an allocation larger than what was left).
_NEAR_LIMIT = 128 << 20


def limits(timeout_s: float | None = None, memory_gb: float | None = None) -> tuple[float, float]:
    """The time (s) and memory (GiB) limits: the arguments, else ``LABMAGIC_NVRTC_TIMEOUT_S`` and
    ``LABMAGIC_NVRTC_MEMORY_GB``, else 300 s and 8 GiB."""
    timeout = _setting(timeout_s, "timeout_s", "LABMAGIC_NVRTC_TIMEOUT_S", DEFAULT_TIMEOUT_S, 0.0)
    memory = _setting(memory_gb, "memory_gb", "LABMAGIC_NVRTC_MEMORY_GB", DEFAULT_MEMORY_GB, MIN_MEMORY_GB)
    return timeout, memory


def _setting(value, name: str, env: str, default: float, minimum: float) -> float:
    source = name if value is not None else env
    if value is None:
        value = os.environ.get(env) or default
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise LabError(f"{source}={value!r} for NVRTC is not a number") from None
    if not math.isfinite(number) or number <= minimum:
        raise LabError(f"{source}={value!r} for NVRTC must be a finite number above {minimum:g}")
    return number


class _Worker:
    """One child process and the pipes to it."""

    def __init__(self, memory_bytes: int):
        self.memory_bytes = memory_bytes
        self.owner = os.getpid()
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(nvrtc_worker.__file__)), str(memory_bytes), _cuda_site() or ""],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
            start_new_session=True,  # a Ctrl-C in a terminal reaches the notebook only; the notebook ends the child
        )

    def alive(self) -> bool:
        return self.proc.poll() is None and self.owner == os.getpid()

    def ask(self, request: dict, timeout_s: float):
        """The reply to ``request``; raises TimeoutError at ``timeout_s`` and EOFError if the child ended."""
        write_message(self.proc.stdin, request)
        deadline = time.monotonic() + timeout_s
        header = self._read(FRAME.size, deadline)
        return pickle.loads(self._read(FRAME.unpack(header)[0], deadline))

    def _read(self, size: int, deadline: float) -> bytes:
        fd, chunks, got = self.proc.stdout.fileno(), [], 0
        while got < size:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            # Short waits: a Ctrl-C raised between them (KeyboardInterrupt) ends the wait promptly.
            ready, _, _ = select.select([fd], [], [], min(left, 0.25))
            if not ready:
                continue
            chunk = os.read(fd, min(size - got, 1 << 20))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def end(self) -> tuple[int, str]:
        """Kill the child if it still runs; its exit status and the last line it wrote to stderr."""
        if self.proc.poll() is None:
            self.proc.kill()
        status = self.proc.wait()
        self.stderr.seek(0)
        lines = self.stderr.read().decode(errors="replace").strip().splitlines()
        return status, (lines[-1].strip() if lines else "")

    def stop(self) -> None:
        if self.owner != os.getpid():
            return  # a forked copy of the parent does not own this child
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.stderr):
            try:
                stream.close()
            except OSError:
                pass


def _cuda_site() -> str | None:
    """The folder that holds the ``cuda`` package this process uses: the child looks there last (a notebook may
    have found it through a sys.path entry that a fresh interpreter does not have)."""
    try:
        import cuda.bindings
    except ImportError:
        return None
    return str(Path(cuda.bindings.__file__).resolve().parents[2])


_LOCK = threading.Lock()
_WORKER: _Worker | None = None


def run(request: dict, timeout_s: float, memory_gb: float) -> dict:
    """Compile ``request`` (see :func:`.nvrtc_worker.compile_program`) in the child; the child's reply.

    Raises CompileError when the compile ran into a limit or the child died, and re-raises a KeyboardInterrupt
    after killing the child at once.
    """
    memory_bytes = int(memory_gb * _GIB)
    with _LOCK:
        try:
            reply = _ask(request, timeout_s, memory_bytes)
        except TimeoutError:
            _retire()
            raise CompileError(f"NVRTC stopped after {timeout_s:g} s, the time limit: a template or constexpr that "
                               "never ends? (a kernel that needs longer: raise LABMAGIC_NVRTC_TIMEOUT_S)") from None
        except (EOFError, OSError) as exc:
            raise _ended(exc, memory_gb) from None
        except BaseException:  # Ctrl-C above all: stop NVRTC now rather than when it returns
            _retire()
            raise
        peak = reply.get("peak_memory", 0)
        if peak > memory_bytes // 2:
            _retire()  # its heap stays large; and a fresh child makes the next peak this compile's own
        if not reply["ok"] and peak + _NEAR_LIMIT >= memory_bytes:
            raise CompileError(f"NVRTC stopped at the {memory_gb:g} GiB memory limit: a template that instantiates "
                               "without end? (a kernel that needs more: raise LABMAGIC_NVRTC_MEMORY_GB)")
        return reply


def _ask(request: dict, timeout_s: float, memory_bytes: int) -> dict:
    global _WORKER
    if _WORKER is not None and (not _WORKER.alive() or _WORKER.memory_bytes != memory_bytes):
        _retire()
    if _WORKER is None:
        _WORKER = _Worker(memory_bytes)
    try:
        return _WORKER.ask(request, timeout_s)
    except BrokenPipeError:  # the warm child had died since the last compile: start another, once
        _retire()
        _WORKER = _Worker(memory_bytes)
        return _WORKER.ask(request, timeout_s)


def _ended(exc: BaseException, memory_gb: float) -> CompileError:
    """The error for a child that could not start or ended without answering."""
    if _WORKER is None:
        return CompileError(f"could not start NVRTC's process: {exc}")
    status, tail = _WORKER.end()
    _retire()
    said = f": {tail}" if tail else ""
    # Killed by a signal (an abort at a failed allocation, the kernel's OOM killer): memory is the likely cause.
    hint = f"; near the {memory_gb:g} GiB memory limit? (raise LABMAGIC_NVRTC_MEMORY_GB)" if status < 0 else ""
    return CompileError(f"NVRTC's process ended without an answer ({_status(status)}){said}{hint}")


def _retire() -> None:
    global _WORKER
    if _WORKER is not None:
        _WORKER.stop()
        _WORKER = None


def _status(code: int) -> str:
    return f"signal {-code}" if code < 0 else f"exit status {code}"


def stop() -> None:
    """End the child (it is started again at the next compile)."""
    with _LOCK:
        _retire()


def worker_pid() -> int | None:
    """The child's process id, while one is running."""
    return _WORKER.proc.pid if _WORKER is not None and _WORKER.alive() else None


atexit.register(stop)
