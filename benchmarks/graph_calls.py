"""How long one call of a short kernel takes inside a CUDA graph, against how many calls one replay holds (#49).

The graph timer (``CudaTimer(graph=True)``) and its anchor, ``triton.testing.do_bench_cudagraph``, both capture
back-to-back calls into one graph and divide a replay's time by the calls in it, but with different numbers of
calls: the timer about 200 us of work a replay (76 calls of a 1 us add), the anchor ``rep / estimate`` calls (about
a thousand or more). On the H200 they read 1.11 and 1.68 us a call for a 2**16-float add. If the per-call time
depends on the graph's length, both are right about different graphs; if it does not, one of them is wrong.

This times graphs of N = 1 ... 4096 calls of ``torch.add`` on 2**16, 2**20 and 2**26 floats (each after a
half-second heat soak of the same call, 21 replays, median), the graph timer, ``do_bench_cudagraph`` at several
``rep`` (so at several N), and eager back-to-back calls timed with events (launch-bound for the short ones).
The slope of replay time against N (least squares over N >= 64) is the steady per-call cost.

Writes ``graph_calls.csv`` (one row per measurement, with provenance) to ``--out`` (default results/<gpu>/).

    python benchmarks/graph_calls.py            # GPU only, about 40 s
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

import labmagic  # noqa: E402,F401  (selects Triton's interpreter where there is no GPU)

SIZES = (2**16, 2**20, 2**26)
CALLS = (1, 4, 16, 64, 76, 256, 1024, 4096)
REPS = (1, 5, 20, 100)  # do_bench_cudagraph's rep, in ms


def soak(fn, ms: float = 500.0) -> None:
    import torch

    deadline = time.perf_counter() + ms / 1e3
    while time.perf_counter() < deadline:
        for _ in range(10):
            fn()
        torch.cuda.synchronize()


def graph_per_call_us(fn, calls: int, replays: int = 21) -> float:
    """Median over ``replays`` of one replay's time (events around it) divided by ``calls``."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]
    for s, e in zip(starts, ends):
        s.record()
        graph.replay()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e3 / calls


def eager_per_call_us(fn, calls: int = 1000) -> float:
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / calls


def slope(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of replay time (us) against calls: the steady cost of one more call."""
    xs = [n for n, _ in points]
    ys = [n * us for n, us in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="folder for graph_calls.csv (default results/<gpu>/)")
    args = parser.parse_args()
    import torch
    from triton.testing import do_bench_cudagraph

    from labmagic.benchmark import provenance
    from labmagic.paths import results_dir
    from labmagic.timing import CudaTimer

    if not torch.cuda.is_available():
        print("graph_calls: needs a GPU")
        return 2
    prov = provenance.collect()
    out_dir = args.out or results_dir()
    rows = []

    def row(size, method, calls, us):
        rows.append({"size": size, "method": method, "calls_per_replay": calls, "us_per_call": f"{us:.4f}", **prov})
        print(f"{size:>10} {method:<28} {calls:>6} {us:9.3f} us")

    for size in SIZES:
        a, b = torch.randn(size, device="cuda"), torch.randn(size, device="cuda")

        def fn(a=a, b=b):
            return torch.add(a, b)

        for _round in range(2):  # two rounds: what drifts with the clocks shows as a difference between them
            points = []
            for calls in CALLS:
                soak(fn)
                us = graph_per_call_us(fn, calls)
                points.append((calls, us))
                row(size, f"graph_round{_round}", calls, us)
            row(size, f"graph_slope_round{_round}", 0, slope([p for p in points if p[0] >= 64]))
        soak(fn)
        timing = CudaTimer(graph=True, rep_ms=50).time(lambda x, y: torch.add(x, y), [(a, b)],
                                                      set_bytes=3 * 4 * size)
        row(size, "labmagic_graph_timer", timing.calls_per_sample, timing.median_ms * 1e3)
        for rep in REPS:
            soak(fn)
            row(size, f"do_bench_cudagraph_rep{rep}", 0, do_bench_cudagraph(fn, rep=rep, return_mode="median") * 1e3)
        soak(fn)
        row(size, "eager_events", 1000, eager_per_call_us(fn))
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "graph_calls.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {out_dir / 'graph_calls.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
