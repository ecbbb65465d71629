"""NVRTC runs in a child process that a time limit, a memory limit and Ctrl-C can stop (issue #13, item 6)."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

from labmagic.compiler import cache, nvrtc
from labmagic.errors import CompileError, LabError

# Each level doubles the parameter pack: 2**40 ints are never reached, and memory grows until something stops it.
RUNAWAY = """\
template <int N, int... Is> struct Doubling { static const int v = Doubling<N - 1, Is..., Is...>::v; };
template <int... Is> struct Doubling<0, Is...> { static const int v = sizeof...(Is); };
extern "C" __global__ void runaway(int* out) { out[0] = Doubling<40, 1>::v; }
"""

SMALL = 'extern "C" __global__ void small(float* a) { a[threadIdx.x] = 1.0f; }'


def _unique(body: str) -> str:
    return f"// {np.random.default_rng().integers(1 << 62)}\n{body}"


def test_runaway_template_stops_at_the_time_limit(monkeypatch):
    monkeypatch.setenv("LABMAGIC_NVRTC_TIMEOUT_S", "1")
    start = time.monotonic()
    with pytest.raises(CompileError, match=r"^NVRTC stopped after 1 s, the time limit: .*LABMAGIC_NVRTC_TIMEOUT_S"):
        nvrtc.compile(RUNAWAY, use_cache=False)
    assert time.monotonic() - start < 6
    # The notebook goes on: the next compile gets a fresh compiler process.
    assert nvrtc.compile(_unique(SMALL), use_cache=False).cubin


def test_runaway_template_stops_at_the_memory_limit():
    from labmagic.compiler import sandbox

    start = time.monotonic()
    with pytest.raises(CompileError, match=r"^NVRTC stopped at the 0.6 GiB memory limit: .*LABMAGIC_NVRTC_MEMORY_GB"):
        nvrtc.compile(RUNAWAY, use_cache=False, memory_gb=0.6, timeout_s=60)
    assert time.monotonic() - start < 30
    assert sandbox.worker_pid() is None  # a process that hit its limit is not used again
    assert nvrtc.compile(_unique(SMALL), use_cache=False, memory_gb=0.6).cubin


def test_ctrl_c_ends_the_compile_at_once():
    from labmagic.compiler import sandbox

    nvrtc.compile(_unique(SMALL), use_cache=False)  # a warm compiler process, so the interrupt lands mid-compile
    main, pids = threading.main_thread().ident, []

    def interrupt():
        pids.append(sandbox.worker_pid())
        signal.pthread_kill(main, signal.SIGINT)

    timer = threading.Timer(0.5, interrupt)
    start = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            nvrtc.compile(RUNAWAY, use_cache=False, timeout_s=60)
    finally:
        timer.cancel()
    assert time.monotonic() - start < 3
    assert pids[0] is not None and sandbox.worker_pid() is None
    with pytest.raises(ProcessLookupError):
        os.kill(pids[0], 0)  # killed and reaped, not left compiling


def test_a_cache_hit_starts_no_compiler_process(tmp_path, monkeypatch):
    from labmagic.compiler import sandbox

    monkeypatch.setenv("LABMAGIC_CACHE_DIR", str(tmp_path))
    src = _unique(SMALL)
    first = nvrtc.compile(src)
    sandbox.stop()
    assert nvrtc.compile(src).origin == "memory"
    cache.forget(first.key)
    assert nvrtc.compile(src).origin == "disk"
    assert sandbox.worker_pid() is None


@pytest.mark.parametrize("env, value, message", [
    ("LABMAGIC_NVRTC_TIMEOUT_S", "soon", "is not a number"),
    ("LABMAGIC_NVRTC_TIMEOUT_S", "-1", "must be a finite number above 0"),
    ("LABMAGIC_NVRTC_MEMORY_GB", "0.1", "must be a finite number above 0.5"),
])
def test_limits_are_checked(monkeypatch, env, value, message):
    monkeypatch.setenv(env, value)
    with pytest.raises(LabError, match=f"^{env}='{value}' for NVRTC {message}"):
        nvrtc.compile(_unique(SMALL), use_cache=False)


def test_a_compiler_process_that_dies_is_reported_and_replaced():
    from labmagic.compiler import sandbox

    nvrtc.compile(_unique(SMALL), use_cache=False)
    os.kill(sandbox.worker_pid(), signal.SIGKILL)  # between compiles (the kernel's OOM killer, say)
    deadline = time.monotonic() + 5
    while sandbox.worker_pid() is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert nvrtc.compile(_unique(SMALL), use_cache=False).cubin  # a fresh process, without a word
    timer = threading.Timer(0.5, lambda: os.kill(sandbox.worker_pid(), signal.SIGKILL))
    timer.start()
    with pytest.raises(CompileError, match=r"^NVRTC's process ended without an answer \(signal 9\); near the 8 GiB "
                                           r"memory limit\?"):
        nvrtc.compile(RUNAWAY, use_cache=False, timeout_s=60)
    timer.join()
    assert nvrtc.compile(_unique(SMALL), use_cache=False).cubin
