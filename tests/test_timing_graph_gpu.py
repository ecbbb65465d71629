"""The graph timer (``CudaTimer(graph=True)``, ``%bench --timer graph``) on a real GPU, against its anchor,
``triton.testing.do_bench_cudagraph``, and with a variant that cannot be captured.

On one input set both replay the same calls with nothing between them (no eviction: what stays in the L2 across
back-to-back calls stays for both), so their medians must agree; a timer that divided a replay by the wrong number
of calls, timed the capture, or left launch overhead in would not. What they cannot share unaided is the board's
power state: measured one after the other, a compute-bound GEMM is timed by the first in a burst (4096^3 bf16 read
0.175 ms, 785 TFLOP/s, on the H200) and, we believe (not yet confirmed on the GPU), by the second at the power cap it drove the board to (0.198 ms, 694 TFLOP/s,
the sustained cuBLAS ceiling `labmagic calibrate` measures), and a 3 us add after an idle capture is timed at
whatever clock the idle left. So each is timed right after the same heat soak (:func:`_soak`: the call itself, back
to back, for half a second), and the comparison is of like with like. The tolerances are then wide enough for the
two methods' residual drift, and far below the errors they are there to catch (a factor of the calls per replay, or
a launch's 5-10 us on a 3 us kernel).
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


def _soak(fn, args, ms: float = 500.0) -> None:
    """Call ``fn(*args)`` back to back for ``ms`` of wall time, then drain: the clocks and the power draw are those
    of this call under steady load, whichever timer comes next."""
    import time

    import torch

    deadline = time.perf_counter() + ms / 1e3
    while time.perf_counter() < deadline:
        for _ in range(10):
            fn(*args)
        torch.cuda.synchronize()


@pytest.mark.parametrize(("make", "size", "fn_name", "tolerance"), [
    pytest.param(_add_sets, 2**16, "add", 0.20, marks=pytest.mark.xfail(  # ~3 us: launch overhead would double it
        reason="open (#49): on the H200 at 45b8d96 the graph timer read 1.11 us a call, do_bench_cudagraph 1.68 us "
               "(76 calls a replay against its ~100); also failed at ebc74e4. Which one is right is not settled "
               "(results/nvidia-h200/gpu_checks/tests_45b8d96/)", strict=False)),
    (_add_sets, 2**26, "add", 0.10),       # ~0.2 ms, memory-bound, far beyond the L2 for both
    (_matmul_sets, 4096, "matmul", 0.10),  # ~0.2 ms, compute-bound
])
def test_the_graph_timer_agrees_with_do_bench_cudagraph_on_one_input_set(make, size, fn_name, tolerance):
    import torch
    from triton.testing import do_bench_cudagraph

    fn = getattr(torch, fn_name)
    sets = make(size)
    set_bytes = sum(x.numel() * x.element_size() for x in sets[0])
    _soak(fn, sets[0])
    timing = CudaTimer(graph=True, rep_ms=50).time(fn, sets, set_bytes=set_bytes)
    assert timing.method.startswith("cuda_graph"), timing.notes
    assert timing.calls_per_sample >= 1
    exact = fn(*(x.float() for x in sets[0]))  # the captured calls computed the right thing
    torch.testing.assert_close(timing.output.float(), exact, rtol=2e-2, atol=1.0 if fn_name == "matmul" else 0.0)
    _soak(fn, sets[0])
    anchor = do_bench_cudagraph(lambda: fn(*sets[0]), rep=20, return_mode="median")
    assert abs(timing.median_ms / anchor - 1) < tolerance, (timing.median_ms, anchor, timing.calls_per_sample)


def test_a_call_that_cannot_be_captured_is_timed_with_events_and_says_why():
    """... and leaves the process as it found it. torch 2.11's CUDAGraph::capture_end throws at cudaStreamEndCapture
    before it restores the stream, ends the allocator's routing to the graph's pool and clears the CUDA generator's
    capturing flag; with that flag left set, every later torch.randn on the GPU raised "Offset increment outside graph
    capture encountered unexpectedly" (seen on the H200 at 45b8d96), and so does the replay of a graph captured before,
    which is why the timer clears the flag on the generator's own state rather than swapping in a copy of it."""
    import torch

    def syncs(a, b):
        out = a + b
        out.sum().item()  # a copy to the host: not allowed while a stream is captured
        return out

    sets = _add_sets(2**20)
    before = torch.cuda.CUDAGraph()  # captured before the failure, as a chapter's decode step would be
    x = torch.ones(4, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = x + 1
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(before):
        y = x + 1
    stream = torch.cuda.current_stream()
    timing = CudaTimer(graph=True, rep_ms=20).time(syncs, sets, set_bytes=8 * 2**20)
    assert torch.cuda.current_stream() == stream  # torch's failed capture_end skips restoring it; the timer does
    assert timing.method == "cuda_event"
    assert any(note.startswith(NOT_CAPTURED) and "timed with events" in note for note in timing.notes), timing.notes
    a, b = sets[timing.output_set]
    torch.testing.assert_close(timing.output, a + b)
    assert torch.randn(8, device="cuda").isfinite().all()  # the generator is out of capture mode
    x.fill_(2)
    before.replay()  # ... on the state the earlier graph holds, not on a copy
    torch.cuda.synchronize()
    assert y.tolist() == [3.0] * 4


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
    assert ref.status == "ok" and ref.timer.startswith("cuda_graph") and ref.error == "", (ref.status, ref.timer,
                                                                                            ref.error)
    assert syncing.status == "ok" and syncing.timer == "cuda_event" and syncing.ms_median > 0, (syncing.status,
                                                                                                 syncing.error)
    assert syncing.error.startswith(NOT_CAPTURED) and "RuntimeError" in syncing.error, syncing.error
    assert torch.cuda.current_stream() == torch.cuda.default_stream()  # a failed capture left no stream behind
    assert "\n" not in syncing.error  # the exception's first line only
    assert ref.host_ms is not None and syncing.host_ms is not None  # the eager figures, whatever the timer
    assert "cuda_graph" in result.timer and "cuda_event" in result.timer
    events = bench(race, save=False, plot=False, timer="events")  # the bench's name wins over the race's
    assert events.row("torch", 2**22).timer == "cuda_event"
