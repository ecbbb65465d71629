"""The host's side of a timed row (labmagic.timing.time_host): what is inside each interval, and how many calls.

Real time on the host clock: a call that sleeps stands for a launch's Python, a ``sync`` that sleeps for the wait on
the device. The assertions are about which interval holds which wait, which a timer that synchronized inside the
host interval, or not after the call, would get wrong.
"""

from __future__ import annotations

import time

import pytest

from labmagic.timing import HOST_CALLS, HostTiming, WallTimer, host_calls, time_host


def test_host_time_ends_at_the_return_and_isolated_latency_at_the_end_of_the_work():
    log = []

    def call(x):
        log.append(("call", x))
        time.sleep(0.002)  # the host's own time
        return x

    def sync():
        log.append(("sync",))
        if log[-2][0] == "call":  # the wait for the call's work, after it returned
            time.sleep(0.003)

    timing = time_host(call, [(1,), (2,)], 3, sync=sync, before=lambda: log.append(("before",)))
    assert isinstance(timing, HostTiming) and timing.calls == 3
    # Before each call: the eviction, then the device drained; after it, the device drained again.
    assert log == [("before",), ("sync",), ("call", 1), ("sync",)] + [("before",), ("sync",), ("call", 2), ("sync",)] \
        + [("before",), ("sync",), ("call", 1), ("sync",)]
    assert 2.0 <= timing.host_ms < timing.isolated_ms
    assert timing.isolated_ms - timing.host_ms >= 3.0  # the wait for the work is in the latency, not the host time


@pytest.mark.parametrize(("device_ms", "rep_ms", "expected"), [
    (0.005, 100.0, HOST_CALLS),  # a decode-sized kernel: the full median
    (0.0, 100.0, HOST_CALLS),
    (1.0, 100.0, 4),             # 5 ms of the 100 ms budget at 1.1 ms a call
    (2.4, 100.0, 2),
    (24.0, 100.0, 1),            # a long GEMM: one call, never none
    (0.005, 1.0, 1),
])
def test_host_calls_fit_in_a_twentieth_of_the_timing(device_ms, rep_ms, expected):
    assert host_calls(device_ms, rep_ms) == expected


def test_the_wall_timer_takes_as_many_host_calls_as_timed_ones_up_to_the_cap():
    calls = []
    WallTimer(reps=3).host(lambda x: calls.append(x), [(0,), (1,)], 1.0)
    assert calls == [0, 1, 0]
    calls.clear()
    WallTimer(reps=50).host(lambda x: calls.append(x), [(0,)], 1.0)
    assert len(calls) == HOST_CALLS

