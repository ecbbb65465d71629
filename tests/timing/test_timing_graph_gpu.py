"""The graph timer (``CudaTimer(graph=True)``, ``%bench --timer graph``) on a real GPU, against its anchor,
``triton.testing.do_bench_cudagraph``, and with a variant that cannot be captured.

On one input set both replay back-to-back calls with nothing between them (no eviction: what stays in the L2 across
calls stays for both) and divide a replay by its calls, so their medians must agree; a timer that divided by the
wrong number of calls, timed the capture, or left launch overhead in would not. Both must also sit where the time
per call no longer depends on the graph's length. Measured on the H200 (``benchmarks/graph_calls.py`` at 925ebca,
``results/nvidia-h200/graph_calls.csv``): a 2**16-float add costs 10-16 us a call in a graph of one call, 1.4-1.6 us
in one of 16 and 1.24-1.28 us from 64 calls to 4096, so any graph of 64 calls or more reads the same call; run
alone, the graph timer (85 calls a replay, under its former rule of 200 us replays) read 1.280 us and
do_bench_cudagraph 1.263 us at rep 20 (2**20 floats: 2.600 and 2.497; 2**26: 186.2 and 184.7). Inside the whole GPU
suite at 45b8d96 they had read 1.11 and 1.68 us, and neither fits that curve at 64 calls or more: the timer's is
below its floor, so the board's state differed between the two measurements; the anchor's is the curve at 4 to 16
calls, which is what ``do_bench_cudagraph`` captures (``rep / estimate`` calls) if the five eager calls of its
estimate, about 40 us, absorb a stall of several ms (a hypothesis: nothing recorded shows one). So here the anchor
gets ``rep=100``, which keeps it at 64 calls or more unless those five calls take over 8 ms, the timer's replays
last about a millisecond (``GRAPH_REPLAY_MS``), and the two are measured in turns, three times each, each after the
same half-second heat soak (:func:`_soak`, the call itself back to back), and their medians compared: one odd
reading does not decide, and what drifts with the board's power state over the test (on the H200 a 4096^3 bf16 GEMM
read 785 TFLOP/s in one burst and 694 in the one right after it) drifts for both. The tolerance, 10%, is over twice
the widest gap seen alone (4%, 2**20 floats) and far below the errors it is there to catch (a factor of the calls
per replay, or a launch's 5-10 us on a 1.3 us call). Each comparison runs in a child process of its own (see the
test), since what the suite's earlier tests leave in the process moved the anchor by 15% at 2**16 floats.
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


def compare_with_anchor(fn_name: str, size: int) -> dict:
    """The graph timer and ``do_bench_cudagraph`` on one input set, in turns, three times each after the same heat
    soak; what the test asserts on. Run in a child of its own (``python -m`` this module): see the test."""
    import statistics

    import torch
    from triton.testing import do_bench_cudagraph

    fn = getattr(torch, fn_name)
    sets = (_matmul_sets if fn_name == "matmul" else _add_sets)(size)
    set_bytes = sum(x.numel() * x.element_size() for x in sets[0])
    ours, anchors = [], []
    for _ in range(3):
        _soak(fn, sets[0])
        timing = CudaTimer(graph=True, rep_ms=50).time(fn, sets, set_bytes=set_bytes)
        assert timing.method.startswith("cuda_graph"), timing.notes
        ours.append(timing.median_ms)
        _soak(fn, sets[0])
        anchors.append(do_bench_cudagraph(lambda: fn(*sets[0]), rep=100, return_mode="median"))
    exact = fn(*(x.float() for x in sets[0]))  # the captured calls computed the right thing
    torch.testing.assert_close(timing.output.float(), exact, rtol=2e-2, atol=1.0 if fn_name == "matmul" else 0.0)
    return {"ours": ours, "anchors": anchors, "calls_per_sample": timing.calls_per_sample,
            "mine": statistics.median(ours), "anchor": statistics.median(anchors)}


@pytest.mark.parametrize(("fn_name", "size"), [
    ("add", 2**16),      # ~1.3 us in a graph, ~7 us eager: on the L2, where the process's history showed
    ("add", 2**26),      # ~0.19 ms, memory-bound, far beyond the L2 for both
    ("matmul", 4096),    # ~0.2 ms, compute-bound
])
def test_the_graph_timer_agrees_with_do_bench_cudagraph_on_one_input_set(fn_name, size):
    """Each comparison runs in a fresh child process. Inside the whole GPU suite on the H200 (5b19d02) the timer
    read 1.253 us a call of the 2**16 add and the anchor 1.460-1.487 (15% apart), while run alone in the same
    session both read 1.25 (``benchmarks/graph_calls.py``): what the earlier tests leave in the process moved the
    anchor, not the timer. A child holds neither's history, so what is compared is the two timers."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    here = Path(__file__)
    code = (f"import json, {here.stem} as t; "
            f"print('RESULT ' + json.dumps(t.compare_with_anchor({fn_name!r}, {size})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=here.parent)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stdout[-2000:] + done.stderr[-4000:]
    result = json.loads(lines[-1][len("RESULT "):])
    if size == 2**16:
        assert result["calls_per_sample"] >= 64  # where the time per call no longer depends on the graph's length
    assert abs(result["mine"] / result["anchor"] - 1) < 0.10, result


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

    # 2**24 floats: 192 MB a call, about 45-60 us, above the events timer's graph_below_us (20 us), so that under
    # the events timer every call is timed with events (at 2**22, 11-14 us, the events timer graphs short calls
    # too, and the last assertion failed on an H100 at d35c80c for that reason, not for the timer's name).
    N = 2**24
    race = Race(chapter="test_graph_timer", variants={"torch": torch.add, "torch_syncs": torch_syncs}, ref="torch",
                make_inputs=lambda n: tuple(_add_sets(n)[0]), shapes=[N], check_shapes=[1023], timer="graph")
    result = bench(race, save=False, plot=False)
    ref, syncing = result.row("torch", N), result.row("torch_syncs", N)
    assert ref.status == "ok" and ref.timer.startswith("cuda_graph") and ref.error == "", (ref.status, ref.timer,
                                                                                            ref.error)
    assert syncing.status == "ok" and syncing.timer == "cuda_event" and syncing.ms_median > 0, (syncing.status,
                                                                                                 syncing.error)
    # The variant's own error, by its class: torch 2.11 raises AcceleratorError (a RuntimeError) for a synchronize
    # inside a capture ("operation not permitted when stream is capturing", H200 at 5b19d02).
    assert syncing.error.startswith(NOT_CAPTURED) and "Error: " in syncing.error, syncing.error
    assert torch.cuda.current_stream() == torch.cuda.default_stream()  # a failed capture left no stream behind
    assert "\n" not in syncing.error  # the exception's first line only
    assert ref.host_ms is not None and syncing.host_ms is not None  # the eager figures, whatever the timer
    assert "cuda_graph" in result.timer and "cuda_event" in result.timer
    events = bench(race, save=False, plot=False, timer="events")  # the bench's name wins over the race's
    assert events.row("torch", N).timer == "cuda_event"
