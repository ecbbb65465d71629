"""CudaTimer's warm-up queues about ``warmup_ms`` of GPU work, however fast the host enqueues.

The loop it replaced enqueued calls until a 25 ms host deadline: a thousand 24 ms GEMMs at 8192^3 when launches
are cheap, 24 s of GPU work per timed row (chapter 02's tuning cell took six minutes on an H200 because of it).
"""

from __future__ import annotations

import time

import pytest

from labmagic.timing import CudaTimer, warmup_calls


@pytest.mark.parametrize(("first_ms", "warmup_ms", "expected"), [
    (24.0, 25.0, 3),      # a long call: the three that give the host time a median
    (5.0, 25.0, 5),
    (0.01, 25.0, 2000),   # a tiny call: capped (the host deadline ends the loop sooner)
    (0.0, 25.0, 2000),    # a call the events read as 0 ms
    (0.5, 25.0, 50),
])
def test_warmup_calls_fill_the_warmup_time(first_ms, warmup_ms, expected):
    assert warmup_calls(first_ms, warmup_ms, max_calls=2000) == expected


@pytest.mark.gpu
def test_warmup_of_a_long_kernel_queues_a_few_calls_not_a_host_deadline_of_them():
    import torch

    timer = CudaTimer(rep_ms=1.0, warmup_ms=25.0, min_reps=3)
    cycles = timer._cycles_for_us(10_000)  # a 10 ms kernel, enqueued in microseconds
    calls = []

    def sleep_10ms(x):
        calls.append(1)
        torch.cuda._sleep(cycles)
        return x

    sets = [(torch.zeros(1, device="cuda"),)]
    t0 = time.perf_counter()
    gpu_ms, _ = timer._estimate(sleep_10ms, sets, blocking=False)
    wall = time.perf_counter() - t0
    # 1 untimed + 1 timed alone + ceil(25 / ~10) = 3 more: 5 calls, about 50 ms of GPU work.
    assert len(calls) <= 6, f"the warm-up made {len(calls)} calls of a 10 ms kernel"
    assert 5.0 < gpu_ms < 40.0
    assert wall < 1.0, f"the warm-up took {wall:.2f} s"
