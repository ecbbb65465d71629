"""The graph timer (``CudaTimer(graph=True)``, ``%bench --timer graph``) on a real GPU, against its anchor,
``triton.testing.do_bench_cudagraph``, and with a variant that cannot be captured.

On one input set both replay the same calls with nothing between them, so their medians must agree; a timer that
divided a replay by the wrong number of calls, timed the capture, or left launch overhead in would not. The
tolerances are wide enough for two methods' clock and power drift, and far below the errors they are there to catch
(a factor of the calls per replay, or a launch's 5-10 us on a 3 us kernel).
"""

from __future__ import annotations

import pytest

from labmagic.benchmark import Race, bench
from labmagic.timing import NOT_CAPTURED, CudaTimer

pytestmark = pytest.mark.gpu


def _add_sets(n):
    import torch

    return [(torch.randn(n, device="cuda"), torch.randn(n, device="cuda"))]


def _matmul_sets(n):
    import torch

    return [(torch.randn(n, n, device="cuda", dtype=torch.bfloat16),
             torch.randn(n, n, device="cuda", dtype=torch.bfloat16))]


@pytest.mark.parametrize(("make", "size", "fn_name", "tolerance"), [
    (_add_sets, 2**16, "add", 0.20),       # ~3 us: launch overhead would double it
    (_add_sets, 2**26, "add", 0.10),       # ~0.2 ms, memory-bound, far beyond the L2 for both
    (_matmul_sets, 4096, "matmul", 0.10),  # ~0.2 ms, compute-bound
])
def test_the_graph_timer_agrees_with_do_bench_cudagraph_on_one_input_set(make, size, fn_name, tolerance):
    import torch
    from triton.testing import do_bench_cudagraph

    fn = getattr(torch, fn_name)
    sets = make(size)
    set_bytes = sum(x.numel() * x.element_size() for x in sets[0])
    timing = CudaTimer(graph=True, rep_ms=50).time(fn, sets, set_bytes=set_bytes)
    assert timing.method.startswith("cuda_graph"), timing.notes
    assert timing.calls_per_sample >= 1
    exact = fn(*(x.float() for x in sets[0]))  # the captured calls computed the right thing
    torch.testing.assert_close(timing.output.float(), exact, rtol=2e-2, atol=1.0 if fn_name == "matmul" else 0.0)
    anchor = do_bench_cudagraph(lambda: fn(*sets[0]), rep=20, return_mode="median")
    assert abs(timing.median_ms / anchor - 1) < tolerance, (timing.median_ms, anchor)


def test_a_call_that_cannot_be_captured_is_timed_with_events_and_says_why():
    import torch

    def syncs(a, b):
        out = a + b
        out.sum().item()  # a copy to the host: not allowed while a stream is captured
        return out

    sets = _add_sets(2**20)
    timing = CudaTimer(graph=True, rep_ms=20).time(syncs, sets, set_bytes=8 * 2**20)
    assert timing.method == "cuda_event"
    assert any(note.startswith(NOT_CAPTURED) and "timed with events" in note for note in timing.notes), timing.notes
    a, b = sets[timing.output_set]
    torch.testing.assert_close(timing.output, a + b)


def test_a_race_with_the_graph_timer_labels_each_row_and_times_the_uncapturable_one_with_events():
    import torch

    def torch_syncs(a, b):
        out = a + b
        torch.cuda.synchronize()  # not allowed while a stream is captured
        return out

    race = Race(chapter="test_graph_timer", variants={"torch": torch.add, "torch_syncs": torch_syncs}, ref="torch",
                make_inputs=lambda n: tuple(_add_sets(n)[0]), shapes=[2**22], check_shapes=[1023], timer="graph")
    result = bench(race, save=False, plot=False)
    ref, syncing = result.row("torch", 2**22), result.row("torch_syncs", 2**22)
    assert ref.status == "ok" and ref.timer.startswith("cuda_graph") and ref.error == ""
    assert syncing.status == "ok" and syncing.timer == "cuda_event" and syncing.ms_median > 0
    assert syncing.error.startswith(NOT_CAPTURED) and "RuntimeError" in syncing.error
    assert "\n" not in syncing.error  # the exception's first line only
    assert ref.host_ms is not None and syncing.host_ms is not None  # the eager figures, whatever the timer
    assert "cuda_graph" in result.timer and "cuda_event" in result.timer
    events = bench(race, save=False, plot=False, timer="events")  # the bench's name wins over the race's
    assert events.row("torch", 2**22).timer == "cuda_event"
