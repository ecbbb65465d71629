"""Timing one variant at one shape, with the GPU's own clock.

Every variant is timed by the GPU's clock: torch, CuPy-launched CUDA and Triton with CUDA events on
torch's current stream, Pallas/JAX (whose launches torch does not own) from the CUPTI records of their
kernels' own start and end. The methods, and the bias each one has, are named in the ``timer`` column
of every result row:

``cuda_event``
    ``start.record(); fn(*inputs); end.record()`` per call, after warm-up, median of many. Before each
    call two things go on the stream, outside the interval. First an L2 eviction: a *read* of a buffer
    twice the L2's size, which leaves the cache clean and cold, the state Nsight Compute's cache
    control gives each kernel. (A ``zero_()`` flush, as often used, leaves the L2 full of *dirty*
    lines whose write-back lands inside the next kernel: ``benchmarks/flush_write_back.py`` measures
    how much, into ``results/<gpu>/flush_write_back.csv``.)
    Then a short ``torch.cuda._sleep`` that outlasts the host's enqueue time of the call, so the start
    event is *queued behind work* when it is recorded and the interval holds the kernels, not the
    Python launch overhead (10-40 us, which would otherwise dominate a 50 us kernel). The interval of
    an empty call (about 1.3 us on an H200: the two events themselves) is measured once and
    subtracted. This is the timer that must agree with Nsight Compute's ``gpu__time_duration`` within
    5% from 50 us up (see ``benchmarks/timer_agreement.py`` and its committed output).
``cuda_graph``
    For calls shorter than ``graph_below_us``, where even a queued launch costs a visible fraction of the kernel,
    many calls are captured into one CUDA graph and each replay is timed with events; the time per call is the
    replay's over the number of calls. A replay holds about :data:`GRAPH_REPLAY_MS` of calls (at the probe's time
    per call; at most 1000 calls): a replay has a fixed cost of its own, the graph's launch and the events around it
    (2-6 us on the H200), which this leaves at about 1% of the figure at most. Measured on the H200
    (``benchmarks/graph_calls.py``, ``results/nvidia-h200/graph_calls.csv``): a 2**16-float add costs 10-16 us a
    call in a graph of one call, 2.6 us in one of 4, 1.4-1.6 us in one of 16 and 1.24-1.28 us from 64 calls to 4096
    (the slope of replay time against calls, its steady cost, is 1.24 us); the old rule of 200 us a replay captured
    85 calls, whose replays lasted 110 us (the probe times an eager call at 2.4 us) and read 1.280 us, 3% over the
    slope. A replay of a millisecond and hundreds of calls is also what a captured decode step is. CuPy and Triton
    launch on torch's current stream, so they are captured; if capture fails (a variant that synchronizes or touches
    the host), the timer falls back to ``cuda_event``, having undone what torch's failed capture leaves behind (the
    capture stream as the current one, the allocator's routing to the graph's pool, and the CUDA generator left
    capturing, which breaks every later ``torch.randn`` on the GPU: ``CudaTimer._time_graph``). No eviction can sit
    between captured calls: the calls rotate over the input sets, and when those all fit in twice the L2 (tiny
    problems, whose working set lives in L2 in real use too) the method says so with a ``+l2`` suffix.

    The same method times *every* call on request (``CudaTimer(graph=True)``, the ``graph`` timer of
    ``%bench race --timer graph`` and ``Race(timer="graph")``): what a captured decode step would see, launch
    overhead gone, against the eager figures of the same row (``host_ms``, ``isolated_ms`` below). A replay holds the
    calls the rule above asks for, but no more than fit in ``rep_ms / min_reps`` (at least one): a 2 ms call on 64
    small input sets is captured 5 times, not 64, so its replays take about ``rep_ms`` in all (:meth:`graph_calls`).
    ``triton.testing.do_bench_cudagraph`` is the method's anchor: it replays one input set's calls without eviction,
    so on one input set the two must agree (``tests/timing/test_timing_graph_gpu``). A call that cannot be captured (it
    synchronizes, copies to the host, or runs on streams of its own, as JAX does) is timed as without the request
    (events, or the device clock for JAX), and its row's note says why, with the exception's first line: its
    ``timer`` column then names the method that did time it.
``cupti``
    JAX (and Pallas) dispatch on JAX's own streams, invisible to torch's events and to graph capture,
    so their calls are timed on the device clock from the kernels' own records: the timed calls run
    under ``torch.profiler`` with CUDA activity only, whose Kineto backend reads CUPTI's activity
    records of every kernel, memcpy and memset of the process (XLA's included: it uses the same
    primary context). Before each call the L2 is evicted, an opening marker kernel
    (``torch.cuda._sleep``) is launched and the device drained; after the call's result is ready a
    closing marker follows. A call's time is the span from the first start to the last end of the
    device work between its two markers (:mod:`labmagic.timing.device_clock`). *In* the span: every kernel
    of the call and the gaps between them (a multi-kernel JAX program that idles the GPU between
    kernels pays for it). *Out*: JAX's host dispatch before the first kernel, the completion wake-up
    after the last, and the eviction. A single-kernel call therefore reads what Nsight Compute's
    ``gpu__time_duration`` would. The profiler's overhead is host-side; at most ``cupti_max_reps``
    calls are profiled. The figure by blocking (below), taken in the same calls with the profiler's
    host overhead added, is kept as ``Timing.host_blocking_ms``. If the records are missing (no
    Kineto/CUPTI, or CUPTI taken by Nsight Compute), the timer falls back to ``cuda_event_blocking``
    and says so in ``Timing.notes``.
``cuda_event_blocking``
    The fallback for JAX, and the method when ``use_cupti=False``. The L2 is evicted, the device
    drained, the start event recorded, the variant called and its result waited for
    (``block_until_ready``) before the end event is recorded. All of JAX's work is therefore inside
    the interval, which is biased *high* by JAX's host dispatch and the completion wake-up (about
    0.25-0.3 ms per call on an H200 with a recent JAX): a Pallas kernel is never flattered, and all
    but the longest look much slower than they are.
``cuda_event+shuffledN`` and ``cuda_event+roundsN``
    ``cuda_event`` for a race declared with ``rounds=N`` (:class:`labmagic.Race`): every variant is first
    warmed up and probed, then each one's timed calls are split into N turns of about ``rep_ms / N``, and
    the variants take turns. A kernel that runs long enough to heat the board (an H200 GEMM at 8192^3 draws
    its 700 W cap within milliseconds and its SM clock then moves by several percent over tens of ms) is then
    timed across a spread of power states, not in whatever state one previous variant left behind
    (``benchmarks/gemm_clocks.py --race`` measures that effect). With ``shuffle=seed`` each round is a fresh
    random order (``shuffledN``); without, the rounds rotate the race's order (``roundsN``), which keeps each
    variant behind the same one every time: on an H200 at 8192^3 a GEMM timed after a slow, cool kernel gains
    up to 10% (``benchmarks/gemm_clocks.py --orders``), so rotation is only fair for races whose calls are
    too short to move the board's power. Graph-timed and JAX variants are timed alone, as without rounds.
``wall``
    :class:`WallTimer`, ``time.perf_counter`` around each call, for CPU-only diagnostics and tests of
    the orchestration; its numbers are never written to ``results/`` automatically.

Nothing here synchronizes inside a variant; synchronization happens between timed calls only.

**The host's side** (:func:`time_host`, a timer's ``host`` method). Every method above times the device, and for the
kernels of an LLM's decode step that is not what a caller waits for: a call that is 23 us on the device may spend
80 us in Python and launches before it returns. So each timed row also gets two host figures, from a few eager calls
made after the device timing (outside it, the variant warm): ``host_ms``, the median time from the Python call to
its return with the GPU not awaited (the device drained before each call, so a full launch queue cannot block it),
and ``isolated_ms``, the median latency of one call as a single eager call sees it, from the call to the end of its
device work (synchronized before and after, the L2 evicted before it as for the device timing). A row whose host
time exceeds its device time is host-bound: called in an eager loop, the host sets the pace, and a CUDA graph (or
fewer launches) is what removes it. The calls are few, :func:`host_calls` of them: up to :data:`HOST_CALLS`, as many
as fit in :data:`HOST_SHARE` of the timer's ``rep_ms`` at the row's device time (at least one), so the host figures
add at most about 5% to a row's timing: 9 calls of a 20 us kernel, 4 of a 1 ms one, one of anything longer than
about 2.5 ms, whose device timing (the warm-up, a probe and at least ten timed calls) costs over twenty calls anyway.
Nine calls give a median where it matters: host times are tens to hundreds of microseconds, so they can decide
whether a call of microseconds is host-bound, and hardly one of milliseconds.
"""

from __future__ import annotations

import contextlib
import math
import random
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .device_clock import call_spans_ms, read_trace
from .noise import median_interval


@dataclass
class Timing:
    """Per-call times of one variant at one shape, and the output of its last timed call."""

    times_ms: list[float]
    method: str
    output: Any = None
    output_set: int = 0
    calls_per_sample: int = 1
    notes: list[str] = field(default_factory=list)
    # ``cupti`` only: median of the same calls timed by blocking on the result (host dispatch included).
    host_blocking_ms: float | None = None

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times_ms)

    @property
    def min_ms(self) -> float:
        return min(self.times_ms)

    @property
    def max_ms(self) -> float:
        return max(self.times_ms)

    @property
    def median_interval_ms(self) -> tuple[float, float] | None:
        """The median's 95% confidence interval over the timed samples (None below six of them)."""
        return median_interval(self.times_ms)


@dataclass
class Prepared:
    """A variant warmed up and probed by a timer's ``prepare``, ready for ``timed_calls``: ``reps`` calls make
    about ``rep_ms`` of timing; ``host_ms`` is the host's time to enqueue one call."""

    fn: Callable
    input_sets: Sequence[tuple]
    reps: int
    host_ms: float = 0.0
    notes: list[str] = field(default_factory=list)


def round_orders(names: Sequence[str], rounds: int, shuffle: int | None = None) -> list[list[str]]:
    """The order of each round: rotated (round r starts with the r-th name, the cyclic order kept, so each
    variant always follows the same one), or, with a ``shuffle`` seed, a fresh random permutation per round."""
    if shuffle is None:
        return [[names[(r + i) % len(names)] for i in range(len(names))] for r in range(rounds)]
    rng = random.Random(shuffle)
    return [rng.sample(list(names), len(names)) for _ in range(rounds)]


def time_in_rounds(timer, calls: dict[str, Callable], input_sets: Sequence[tuple], rounds: int, *,
                   blocking: Sequence[str] = (), set_bytes: int = 0,
                   shuffle: int | None = None) -> dict[str, Timing | Exception]:
    """Time several variants in turns (the ``cuda_event+roundsN`` method in the module docstring): each is
    prepared (warm-up, probe), then each round times ``reps / rounds`` calls of each prepared variant, in the
    order :func:`round_orders` gives. A variant whose method is not ``cuda_event`` (``blocking``: JAX; graphs for
    short calls) comes back from ``prepare`` already timed, alone. A variant that raises, while prepared or in any
    round, maps to its exception and takes no further turns; the others go on. Only the last turn's output is
    kept per variant."""
    results: dict[str, Timing | Exception] = {}
    prepared: dict[str, Prepared] = {}
    for name, fn in calls.items():
        try:
            ready = timer.prepare(fn, input_sets, blocking=name in blocking, set_bytes=set_bytes)
        except Exception as exc:  # noqa: BLE001 - one variant's failure is its row's, not the race's
            results[name] = exc
            continue
        if isinstance(ready, Timing):
            results[name] = ready
        else:
            prepared[name] = ready
    names = list(prepared)
    times: dict[str, list[float]] = {name: [] for name in names}
    last: dict[str, Timing] = {}
    for order in round_orders(names, rounds, shuffle):
        for name in order:
            if name in results:
                continue
            ready = prepared[name]
            try:
                turn = timer.timed_calls(ready, max(1, math.ceil(ready.reps / rounds)))
            except Exception as exc:  # noqa: BLE001
                results[name] = exc
                last.pop(name, None)
                continue
            times[name].extend(turn.times_ms)
            last[name] = turn
    for name, turn in last.items():
        how = "rounds" if shuffle is None else "shuffled"
        results[name] = Timing(times[name], f"{turn.method}+{how}{rounds}", turn.output, turn.output_set,
                               notes=turn.notes)
    return results


#: How long one replay of the ``cuda_graph`` method lasts, at the probe's time per call (see the module docstring).
GRAPH_REPLAY_MS = 1.0

#: The most eager calls :func:`time_host` makes per variant and shape, and the share of ``rep_ms`` they may take
#: (see the module docstring: the host figures must not lengthen a sweep by more than a few percent).
HOST_CALLS = 9
HOST_SHARE = 0.05
#: What one of those calls costs beyond its device time: the L2 eviction, two synchronizations and the host's own
#: time, about 0.1 ms on an H200 host (an allowance for :func:`host_calls`, not a measurement).
HOST_CALL_OVERHEAD_MS = 0.1


@dataclass
class HostTiming:
    """One eager call seen from the host: median ``host_ms`` (call to return, GPU not awaited) and ``isolated_ms``
    (call to the end of its work, synchronized before and after), over ``calls`` calls."""

    host_ms: float
    isolated_ms: float
    calls: int


def host_calls(device_ms: float, rep_ms: float) -> int:
    """How many calls :func:`time_host` makes for a variant whose device time is ``device_ms``: as many as fit in
    ``HOST_SHARE * rep_ms`` (each costing its device time and :data:`HOST_CALL_OVERHEAD_MS`), at least one and at
    most :data:`HOST_CALLS`."""
    fit = HOST_SHARE * rep_ms / (max(device_ms, 0.0) + HOST_CALL_OVERHEAD_MS)
    return int(max(1, min(HOST_CALLS, math.floor(fit))))


def time_host(fn: Callable, input_sets: Sequence[tuple], calls: int, *, sync: Callable[[], None],
              before: Callable[[], None] | None = None) -> HostTiming:
    """Time ``calls`` eager calls of ``fn`` (rotating over ``input_sets``) on the host clock. Before each,
    ``before()`` (the L2 eviction) and ``sync()``; then the call, timed to its return (``host_ms``), then its result
    waited for (:func:`block_until_ready`, then ``sync()``), timed to that end (``isolated_ms``)."""
    k = len(input_sets)
    host, isolated = [], []
    for i in range(max(1, calls)):
        args = input_sets[i % k]
        if before is not None:
            before()
        sync()
        t0 = time.perf_counter()
        out = fn(*args)
        t1 = time.perf_counter()
        block_until_ready(out)
        sync()
        t2 = time.perf_counter()
        host.append((t1 - t0) * 1e3)
        isolated.append((t2 - t0) * 1e3)
        del out
    return HostTiming(statistics.median(host), statistics.median(isolated), len(host))


#: How the ``graph`` timer's note on a call it could not capture begins.
NOT_CAPTURED = "not capturable in a CUDA graph"


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
        return self.timed_calls(self.prepare(fn, input_sets), self.reps)

    def prepare(self, fn: Callable, input_sets: Sequence[tuple], *, blocking: bool = False,
                set_bytes: int = 0) -> Prepared:
        """Warm up; what :meth:`timed_calls` needs (see :func:`time_in_rounds`)."""
        k = len(input_sets)
        for i in range(self.warmup):
            block_until_ready(fn(*input_sets[i % k]))
        return Prepared(fn, input_sets, self.reps)

    def host(self, fn: Callable, input_sets: Sequence[tuple], device_ms: float) -> HostTiming:
        """:func:`time_host` on CPU: ``reps`` calls (at most :data:`HOST_CALLS`); nothing to synchronize."""
        return time_host(fn, input_sets, min(self.reps, HOST_CALLS), sync=_no_sync)

    def timed_calls(self, prepared: Prepared, reps: int) -> Timing:
        fn, input_sets, k = prepared.fn, prepared.input_sets, len(prepared.input_sets)
        times, out, idx = [], None, 0
        for i in range(reps):
            idx = i % k
            t0 = time.perf_counter()
            out = fn(*input_sets[idx])
            block_until_ready(out)
            times.append((time.perf_counter() - t0) * 1e3)
        return Timing(times, self.name, out, idx)


def warmup_calls(first_ms: float, warmup_ms: float, max_calls: int) -> int:
    """How many warm-up calls fit in ``warmup_ms`` of GPU time for a call that took ``first_ms`` (3 at least, so
    the host time per call is a median of three; ``max_calls`` at most)."""
    return int(min(max_calls, max(3, math.ceil(warmup_ms / max(first_ms, 1e-4)))))


class CudaTimer:
    """CUDA-event timing on torch's current stream (see the module docstring for the methods)."""

    def __init__(self, rep_ms: float = 100.0, warmup_ms: float = 25.0, min_reps: int = 10,
                 max_reps: int = 2000, graph_below_us: float = 20.0, use_graphs: bool = True,
                 use_cupti: bool = True, cupti_max_reps: int = 200, graph: bool = False):
        """``graph``: time every call that can be captured in a CUDA graph, not only those under
        ``graph_below_us`` (the ``graph`` timer; see the module docstring)."""
        self.rep_ms, self.warmup_ms = rep_ms, warmup_ms
        self.min_reps, self.max_reps = min_reps, max_reps
        self.graph_below_us, self.use_graphs, self.graph = graph_below_us, use_graphs, graph
        self.use_cupti, self.cupti_max_reps = use_cupti, cupti_max_reps
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
        """Warm up (JIT compiles, module loads) and return (GPU ms per call, host ms to enqueue one call).

        The warm-up queues at most about ``warmup_ms`` of GPU work: one call timed alone sets how many follow.
        (A loop that enqueues until a host deadline queues as many calls as the host can issue in that time: a
        thousand 24 ms GEMMs at 8192^3, 24 s of GPU work for a 25 ms warm-up.)"""
        import torch

        k = len(input_sets)
        block_until_ready(fn(*input_sets[0]))
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        block_until_ready(fn(*input_sets[1 % k]))
        end.record()
        torch.cuda.synchronize()
        calls = warmup_calls(start.elapsed_time(end), self.warmup_ms, self.max_reps)
        host = []
        deadline = time.perf_counter() + self.warmup_ms / 1e3
        n = 0
        start.record()
        while n < calls and (n < 3 or time.perf_counter() < deadline):
            t0 = time.perf_counter()
            out = fn(*input_sets[(n + 2) % k])
            host.append((time.perf_counter() - t0) * 1e3)
            if blocking:
                block_until_ready(out)
            n += 1
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / n, statistics.median(host)

    # -- methods -----------------------------------------------------------------------------------
    def time(self, fn: Callable, input_sets: Sequence[tuple], *, blocking: bool = False,
             set_bytes: int = 0) -> Timing:
        prepared = self.prepare(fn, input_sets, blocking=blocking, set_bytes=set_bytes)
        if isinstance(prepared, Timing):
            return prepared
        return self.timed_calls(prepared, prepared.reps)

    def prepare(self, fn: Callable, input_sets: Sequence[tuple], *, blocking: bool = False,
                set_bytes: int = 0) -> Prepared | Timing:
        """Warm up and probe the call; the finished :class:`Timing` where the method is not ``cuda_event``
        (JAX's blocking or CUPTI timing, graphs for short calls), else what :meth:`timed_calls` needs."""
        est_ms, host_ms = self._estimate(fn, input_sets, blocking)
        if blocking:
            timing = (self._time_cupti if self.use_cupti else self._time_blocking)(fn, input_sets, self._reps(est_ms))
            if self.graph:
                timing.notes.append(f"{NOT_CAPTURED}: JAX runs on streams of its own, which a torch CUDA graph does "
                                    f"not capture; timed as {timing.method}")
            return timing
        # The warm-up loop's rate is bounded by the host (Triton's launcher alone costs ~20 us), so the
        # kernel's own length, which decides between graphs and events, comes from a short event probe.
        probe = self._time_events(fn, input_sets, self.min_reps, host_ms)
        kernel_ms = max(probe.median_ms, 1e-4)
        notes = []
        if self.graph or (self.use_graphs and kernel_ms * 1e3 < self.graph_below_us):
            timing = self._time_graph(fn, input_sets, kernel_ms, set_bytes)
            if timing is not None:
                return timing
            notes.append(f"{NOT_CAPTURED} ({self._graph_error}); timed with events" if self.graph
                         else f"graph capture failed, timed with events: {self._graph_error}")
        return Prepared(fn, input_sets, self._reps(kernel_ms), host_ms, notes)

    def host(self, fn: Callable, input_sets: Sequence[tuple], device_ms: float) -> HostTiming:
        """The host figures of a variant already timed on the device (see the module docstring): :func:`host_calls`
        calls at ``device_ms``, the L2 evicted and the device drained before each."""
        import torch

        return time_host(fn, input_sets, host_calls(device_ms, self.rep_ms), sync=torch.cuda.synchronize,
                         before=self._evict)

    def timed_calls(self, prepared: Prepared, reps: int) -> Timing:
        """``reps`` calls of a prepared variant with events (``cuda_event``)."""
        timing = self._time_events(prepared.fn, prepared.input_sets, reps, prepared.host_ms)
        timing.notes.extend(prepared.notes)
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

    def _time_cupti(self, fn, input_sets, reps) -> Timing:
        """Bracket ``calls + 1`` calls with marker kernels under the profiler; time the last ``calls``
        from their kernels' CUPTI records (see the module docstring and :mod:`labmagic.timing.device_clock`)."""
        import torch

        k = len(input_sets)
        calls = max(1, min(reps, self.cupti_max_reps))
        marker = self._cycles_for_us(1.0)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        blocking, out, idx, spans, error = [], None, 0, None, "no device records for the calls"
        try:
            from torch.profiler import ProfilerActivity, profile

            with _one_profiling_cycle(), profile(activities=[ProfilerActivity.CUDA]) as prof:
                for i in range(calls + 1):  # call 0 is untimed: it absorbs records lost as CUPTI starts
                    idx = i % k
                    self._evict()
                    torch.cuda._sleep(marker)  # opening marker
                    torch.cuda.synchronize()  # the call's kernels start after the marker has ended
                    start.record()
                    out = fn(*input_sets[idx])
                    block_until_ready(out)
                    end.record()
                    # Drain the whole device (JAX's streams too, even if ``out`` is a torch view of a JAX
                    # array that ``block_until_ready`` cannot wait for), so the closing marker follows
                    # every kernel of the call.
                    torch.cuda.synchronize()
                    torch.cuda._sleep(marker)
                    torch.cuda.synchronize()
                    if i:
                        blocking.append(start.elapsed_time(end))
            with tempfile.TemporaryDirectory() as tmp:
                trace = Path(tmp) / "trace.json"
                prof.export_chrome_trace(str(trace))
                spans = call_spans_ms(read_trace(trace), calls)
        except Exception as exc:  # noqa: BLE001 - the device clock is a refinement; blocking still works
            torch.cuda.synchronize()
            error = f"{type(exc).__name__}: {exc}"
        if not spans:
            timing = self._time_blocking(fn, input_sets, reps)
            timing.notes.append(f"device clock (CUPTI) unavailable, timed by blocking on the result: {error}")
            return timing
        return Timing(spans, "cupti", out, idx, host_blocking_ms=statistics.median(blocking))

    def graph_calls(self, est_ms: float, sets: int) -> int:
        """Calls per captured replay: enough to make the replay itself last :data:`GRAPH_REPLAY_MS` (at most 1000)
        and to visit every input set, but no more than fit in a tenth of ``rep_ms`` (at least one)."""
        calls = int(max(sets, min(1000, math.ceil(GRAPH_REPLAY_MS / max(est_ms, 1e-4)))))
        return max(1, min(calls, math.floor(self.rep_ms / (self.min_reps * max(est_ms, 1e-4)))))

    def _time_graph(self, fn, input_sets, est_ms, set_bytes) -> Timing | None:
        import torch

        k = len(input_sets)
        calls = self.graph_calls(est_ms, k)
        # The calls rotate over min(calls, k) input sets: in L2 when those fit in twice its size.
        resident = min(calls, k) * set_bytes < 2 * self.l2_bytes()
        stream = torch.cuda.current_stream()
        graph, pool = torch.cuda.CUDAGraph(), torch.cuda.graph_pool_handle()
        capturing = False
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # capture needs a warm-up on a side stream; every input set once, so
                for i in range(max(3, k)):  # that what a call caches (a TMA kernel's maps) is not made in the graph
                    fn(*input_sets[i % k])
            torch.cuda.current_stream().wait_stream(side)
            out = None
            capturing = True
            with torch.cuda.graph(graph, pool=pool):
                for j in range(calls):
                    out = fn(*input_sets[j % k])
            capturing = False
            graph.replay()
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - capture is an optimisation; events still work
            # A capture the variant broke (a synchronize, a copy to the host) makes torch.cuda.graph's __exit__ raise
            # from CUDAGraph::capture_end at cudaStreamEndCapture, before the rest of capture_end and __exit__ run
            # (torch 2.11). Three things they would have undone are undone here, or every later call (the events
            # fallback, the next variants, the chapter's own cells) would pay for them:
            # - the current stream is still torch's capture stream;
            # - the caching allocator still routes allocations to the graph's pool (endAllocateToPool): each later
            #   allocation asks the driver whether its stream is capturing, and while any capture is "underway" the
            #   allocator never reclaims the blocks of tensors used on several streams;
            # - the default CUDA generator's state is left capturing (capture_epilogue never ran), so every later
            #   random op on the GPU (torch.randn of the next race's inputs) raises "Offset increment outside graph
            #   capture encountered unexpectedly", and so does the replay of any graph captured earlier (each replay
            #   advances that same state). Only capture_epilogue clears the flag, and only a capture that ends runs
            #   it, so a capture of one empty kernel is made and ended: the state is the same object, not a copy
            #   swapped in with graphsafe_set_state, so graphs captured before (a chapter's decode step) replay too.
            # Where capture_end did finish (the variant raised a Python error inside the capture), the graph owns
            # its pool as usual and none of this is needed.
            torch.cuda.set_stream(stream)
            if capturing and not _capture_ended(graph):
                device = torch.cuda.current_device()
                for undo in (torch._C._cuda_endAllocateToPool, torch._C._cuda_releasePool):
                    with contextlib.suppress(RuntimeError):  # a capture_begin that failed before either was needed
                        undo(device, pool)
                settle = torch.cuda.CUDAGraph()
                with torch.cuda.graph(settle):
                    torch.cuda._sleep(1)
                del settle
            torch.cuda.synchronize()
            self._graph_error = first_cause(exc)
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


def _capture_ended(graph) -> bool:
    """Whether ``CUDAGraph.capture_end`` ran to its end (``pool()`` refuses a graph whose capture did not)."""
    try:
        graph.pool()
    except RuntimeError:
        return False
    return True


def first_cause(exc: BaseException) -> str:
    """``Type: first line`` of the exception that started ``exc``'s chain: a capture the variant broke (a
    synchronize, a copy to the host) ends in the capture's own error ("operation failed due to a previous error
    during capture"), raised while the variant's, which says what it did, was being handled."""
    while exc.__cause__ is not None or (exc.__context__ is not None and not exc.__suppress_context__):
        exc = exc.__cause__ or exc.__context__
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]


def _no_sync() -> None:
    """Nothing to wait for: the CPU's work is done when the call returns (a JAX result is waited for apart)."""


@contextlib.contextmanager
def _one_profiling_cycle():
    """torch warns that each profiling cycle drops the previous one's events: the timer runs one cycle and reads
    it whole, so the warning would only be noise in a chapter's output."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Profiler clears events")
        yield
