"""Timing one variant at one shape, with the GPU's own clock.

Every variant (torch, CuPy-launched CUDA, Triton, Pallas/JAX) is timed with CUDA events recorded on
torch's current stream, so all of them are measured by the same clock. The methods, and the bias each
one has, are named in the ``timer`` column of every result row:

``cuda_event``
    ``start.record(); fn(*inputs); end.record()`` per call, after warm-up, median of many. Before each
    call two things go on the stream, outside the interval. First an L2 eviction: a *read* of a buffer
    twice the L2's size, which leaves the cache clean and cold, the state Nsight Compute's cache
    control gives each kernel. (A ``zero_()`` flush, as often used, leaves the L2 full of *dirty*
    lines whose write-back lands inside the next kernel: +6 us on a 45 us vector add on an H200.)
    Then a short ``torch.cuda._sleep`` that outlasts the host's enqueue time of the call, so the start
    event is *queued behind work* when it is recorded and the interval holds the kernels, not the
    Python launch overhead (10-40 us, which would otherwise dominate a 50 us kernel). The interval of
    an empty call (about 1.3 us on an H200: the two events themselves) is measured once and
    subtracted. This is the timer that must agree with Nsight Compute's ``gpu__time_duration`` within
    5% from 50 us up (see ``benchmarks/timer_agreement.py`` and its committed output).
``cuda_graph``
    For calls shorter than ``graph_below_us``, where even a queued launch costs a visible fraction of
    the kernel, many calls are captured into one CUDA graph and each replay is timed with events; the
    time per call is the replay's over the number of calls. CuPy and Triton launch on torch's current
    stream, so they are captured; if capture fails (a variant that synchronizes or touches the host),
    the timer falls back to ``cuda_event``. No eviction can sit between captured calls: the calls
    rotate over the input sets, and when those all fit in twice the L2 (tiny problems, whose working
    set lives in L2 in real use too) the method says so with a ``+l2`` suffix.
``cuda_event_blocking``
    JAX (and Pallas) dispatch on JAX's own streams, invisible to torch's events and to graph capture.
    The L2 is evicted, the device drained, the start event recorded, the variant called and its
    result waited for (``block_until_ready``) before the end event is recorded. All of JAX's work is
    therefore inside the interval, which is biased *high* by JAX's host dispatch and the completion
    wake-up (typically 10-30 us): a Pallas kernel is never flattered, and short ones look slower than
    they are.
``wall``
    :class:`WallTimer`, ``time.perf_counter`` around each call, for CPU-only diagnostics and tests of
    the orchestration; its numbers are never written to ``results/`` automatically.

Nothing here synchronizes inside a variant; synchronization happens between timed calls only.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Timing:
    """Per-call times of one variant at one shape, and the output of its last timed call."""

    times_ms: list[float]
    method: str
    output: Any = None
    output_set: int = 0
    calls_per_sample: int = 1
    notes: list[str] = field(default_factory=list)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times_ms)

    @property
    def min_ms(self) -> float:
        return min(self.times_ms)

    @property
    def max_ms(self) -> float:
        return max(self.times_ms)


def block_until_ready(out) -> None:
    """Wait for a JAX result (a pytree of arrays); a no-op for anything else."""
    if hasattr(out, "block_until_ready"):
        out.block_until_ready()
        return
    if isinstance(out, (tuple, list)):
        for item in out:
            block_until_ready(item)


def is_jax_output(out) -> bool:
    return type(out).__module__.split(".")[0] in ("jax", "jaxlib")


class WallTimer:
    """Host wall-clock timing (``time.perf_counter``): CPU-only diagnostics and orchestration tests."""

    name = "wall"

    def __init__(self, reps: int = 5, warmup: int = 1):
        self.reps, self.warmup = reps, warmup

    def time(self, fn: Callable, input_sets: Sequence[tuple], *, blocking: bool = False,
             set_bytes: int = 0) -> Timing:
        k = len(input_sets)
        for i in range(self.warmup):
            block_until_ready(fn(*input_sets[i % k]))
        times, out, idx = [], None, 0
        for i in range(self.reps):
            idx = i % k
            t0 = time.perf_counter()
            out = fn(*input_sets[idx])
            block_until_ready(out)
            times.append((time.perf_counter() - t0) * 1e3)
        return Timing(times, self.name, out, idx)


class CudaTimer:
    """CUDA-event timing on torch's current stream (see the module docstring for the methods)."""

    def __init__(self, rep_ms: float = 100.0, warmup_ms: float = 25.0, min_reps: int = 10,
                 max_reps: int = 2000, graph_below_us: float = 20.0, use_graphs: bool = True):
        self.rep_ms, self.warmup_ms = rep_ms, warmup_ms
        self.min_reps, self.max_reps = min_reps, max_reps
        self.graph_below_us, self.use_graphs = graph_below_us, use_graphs
        self._flush = None
        self._overhead: float | None = None
        self._graph_error = ""

    # -- helpers -----------------------------------------------------------------------------------
    @staticmethod
    def l2_bytes() -> int:
        import torch

        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        return int(getattr(props, "L2_cache_size", 0) or 50 * 2**20)

    @staticmethod
    def _cycles_for_us(us: float) -> int:
        import torch

        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        khz = getattr(props, "clock_rate", 0) or 2_000_000  # kHz; assume 2 GHz (sleeping longer is harmless)
        return int(us * khz / 1e3)

    def _evict(self) -> None:
        """Leave the L2 clean and cold: read (never write) a buffer twice its size. Asynchronous."""
        import torch

        if self._flush is None:
            self._flush = torch.zeros(2 * self.l2_bytes() // 4, dtype=torch.int32, device="cuda")
        self._flush.max()

    def _event_overhead_ms(self, cycles: int) -> float:
        """Median interval of an empty call, measured exactly like a real one (once per timer)."""
        import torch

        if self._overhead is None:
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(50)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(50)]
            for s, e in zip(starts, ends):
                self._evict()
                torch.cuda._sleep(cycles)
                s.record()
                e.record()
            torch.cuda.synchronize()
            self._overhead = statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))
        return self._overhead

    def _estimate(self, fn, input_sets, blocking: bool) -> tuple[float, float]:
        """Warm up (JIT compiles, module loads) and return (GPU ms per call, host ms to enqueue one call)."""
        import torch

        k = len(input_sets)
        block_until_ready(fn(*input_sets[0]))
        torch.cuda.synchronize()
        host = []
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        deadline = time.perf_counter() + self.warmup_ms / 1e3
        n, i = 0, 0
        start.record()
        while n < 3 or (time.perf_counter() < deadline and n < self.max_reps):
            t0 = time.perf_counter()
            out = fn(*input_sets[i % k])
            host.append((time.perf_counter() - t0) * 1e3)
            if blocking:
                block_until_ready(out)
            n, i = n + 1, i + 1
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / n, statistics.median(host)

    # -- methods -----------------------------------------------------------------------------------
    def time(self, fn: Callable, input_sets: Sequence[tuple], *, blocking: bool = False,
             set_bytes: int = 0) -> Timing:
        est_ms, host_ms = self._estimate(fn, input_sets, blocking)
        if blocking:
            return self._time_blocking(fn, input_sets, self._reps(est_ms))
        # The warm-up loop's rate is bounded by the host (Triton's launcher alone costs ~20 us), so the
        # kernel's own length, which decides between graphs and events, comes from a short event probe.
        probe = self._time_events(fn, input_sets, self.min_reps, host_ms)
        kernel_ms = max(probe.median_ms, 1e-4)
        notes = []
        if self.use_graphs and kernel_ms * 1e3 < self.graph_below_us:
            resident = len(input_sets) * set_bytes < 2 * self.l2_bytes()
            timing = self._time_graph(fn, input_sets, kernel_ms, resident)
            if timing is not None:
                return timing
            notes.append(f"graph capture failed, timed with events: {self._graph_error}")
        timing = self._time_events(fn, input_sets, self._reps(kernel_ms), host_ms)
        timing.notes.extend(notes)
        return timing

    def _reps(self, per_call_ms: float) -> int:
        return int(min(self.max_reps, max(self.min_reps, math.ceil(self.rep_ms / max(per_call_ms, 1e-4)))))

    def _time_events(self, fn, input_sets, reps, host_ms) -> Timing:
        import torch

        k = len(input_sets)
        # Outlast the host's enqueue of start + call + end (x2 and +20 us of margin).
        cycles = self._cycles_for_us(2 * host_ms * 1e3 + 20)
        overhead = self._event_overhead_ms(cycles)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        out, idx = None, 0
        for i in range(reps):
            idx = i % k
            self._evict()
            torch.cuda._sleep(cycles)
            starts[i].record()
            out = fn(*input_sets[idx])
            ends[i].record()
        torch.cuda.synchronize()
        times = [max(s.elapsed_time(e) - overhead, 0.0) for s, e in zip(starts, ends)]
        return Timing(times, "cuda_event", out, idx)

    def _time_blocking(self, fn, input_sets, reps) -> Timing:
        import torch

        k = len(input_sets)
        times, out, idx = [], None, 0
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for i in range(reps):
            idx = i % k
            self._evict()
            torch.cuda.synchronize()  # between calls: nothing of ours may overlap the next interval
            start.record()
            out = fn(*input_sets[idx])
            block_until_ready(out)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return Timing(times, "cuda_event_blocking", out, idx)

    def _time_graph(self, fn, input_sets, est_ms, resident) -> Timing | None:
        import torch

        k = len(input_sets)
        # Enough calls per replay to make the replay itself >= ~200 us, and to visit every input set.
        calls = int(max(k, min(1000, math.ceil(0.2 / max(est_ms, 1e-4)))))
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # capture needs a warm-up on a side stream
                for i in range(3):
                    fn(*input_sets[i % k])
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            out = None
            with torch.cuda.graph(graph):
                for j in range(calls):
                    out = fn(*input_sets[j % k])
            graph.replay()
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - capture is an optimisation; events still work
            torch.cuda.synchronize()
            self._graph_error = f"{type(exc).__name__}: {exc}"
            return None
        reps = self._reps(est_ms * calls)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for i in range(reps):
            starts[i].record()
            graph.replay()
            ends[i].record()
        torch.cuda.synchronize()
        times = [s.elapsed_time(e) / calls for s, e in zip(starts, ends)]
        # The output of the last captured call, as written by the last replay.
        return Timing(times, "cuda_graph" + ("+l2" if resident else ""), out, (calls - 1) % k, calls)
