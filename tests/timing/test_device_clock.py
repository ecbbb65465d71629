"""Splitting CUPTI device records into timed calls (labmagic.timing.device_clock), on synthetic Kineto traces."""

from __future__ import annotations

import json

import pytest

from labmagic.timing.device_clock import DeviceEvent, call_spans_ms, device_events, read_trace

SPIN = "void at::cuda::(anonymous namespace)::spin_kernel(long)"
EVICT = "void at::native::reduce_kernel<512, 1, ReduceOp<int, MaxOps<int>>>(...)"


def _trace(calls):
    """Chrome-trace events of bracketed calls, as the timer lays them out: eviction, opening marker,
    the call's kernels (start offset, duration) from the marker's end, closing marker; plus host-side
    noise (runtime calls, an annotation) that must not count as device work."""
    events, t = [], 1000.0
    for kernels in calls:
        events.append({"ph": "X", "cat": "kernel", "name": EVICT, "ts": t, "dur": 30.0})
        t += 40.0
        events.append({"ph": "X", "cat": "kernel", "name": SPIN, "ts": t, "dur": 1.0})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": t, "dur": 500.0})
        t += 1.0
        end = t
        for offset, dur, cat in kernels:
            events.append({"ph": "X", "cat": cat, "name": "loop_add_fusion", "ts": t + offset, "dur": dur})
            end = max(end, t + offset + dur)
        events.append({"ph": "X", "cat": "gpu_user_annotation", "name": "call", "ts": t, "dur": 900.0})
        t = end + 250.0  # the host's wake-up before the closing marker: not device work
        events.append({"ph": "X", "cat": "kernel", "name": SPIN, "ts": t, "dur": 1.0})
        t += 5.0
    return events[::-1]  # records do not arrive in time order


def test_spans_cover_first_start_to_last_end_of_each_call_and_nothing_else():
    calls = [[(300.0, 50.0, "kernel")],  # the untimed first call
             [(280.0, 45.0, "kernel")],
             [(300.0, 10.0, "gpu_memset"), (320.0, 40.0, "kernel")],  # a gap of 10 us between kernels is in
             [(260.0, 20.0, "kernel"), (290.0, 30.0, "gpu_memcpy")]]
    spans = call_spans_ms(device_events(_trace(calls)), 3)
    assert spans == pytest.approx([0.045, 0.060, 0.060])


def test_markers_lost_at_profiler_start_do_not_shift_the_pairing():
    calls = [[(300.0, 50.0, "kernel")], [(280.0, 45.0, "kernel")], [(280.0, 70.0, "kernel")]]
    events = device_events(_trace(calls))
    first_spin = next(e for e in events if "spin_kernel" in e.name)
    events.remove(first_spin)  # the untimed call's opening marker was not recorded
    assert call_spans_ms(events, 2) == pytest.approx([0.045, 0.070])


def test_missing_records_mean_no_spans():
    calls = [[(300.0, 50.0, "kernel")], [(280.0, 45.0, "kernel")], [(280.0, 70.0, "kernel")]]
    events = device_events(_trace(calls))
    assert call_spans_ms([], 2) is None  # CUPTI recorded nothing (e.g. Nsight Compute holds it)
    markers_only = [e for e in events if "spin_kernel" in e.name or "reduce_kernel" in e.name]
    assert call_spans_ms(markers_only, 2) is None  # JAX's kernels were not recorded
    assert call_spans_ms(events, 4) is None  # one pair short: every timed call must be bracketed
    assert call_spans_ms(events + [DeviceEvent("spin_kernel", 9e9, 9e9 + 1)] * 3, 2) is None  # stray markers


def test_read_trace_keeps_device_work_only(tmp_path):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": _trace([[(300.0, 50.0, "kernel")]]) + [{"ph": "i", "name": "x"}]}))
    events = read_trace(path)
    assert [e.name for e in events] == [EVICT, SPIN, "loop_add_fusion", SPIN]
    assert events[2].end_us - events[2].start_us == pytest.approx(50.0)


def test_an_event_keeps_its_stream_and_category():
    """The exercise judge reads which stream each kernel ran on, and which records are copies."""
    events = device_events([
        {"ph": "X", "cat": "kernel", "name": SPIN, "ts": 10.0, "dur": 1.0, "args": {"stream": 7, "device": 0}},
        {"ph": "X", "cat": "Kernel", "name": "mine", "ts": 12.0, "dur": 3.0, "args": {"stream": 13}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "ts": 16.0, "dur": 2.0},
    ])
    assert [(e.name, e.stream, e.category) for e in events] == [
        (SPIN, 7, "kernel"), ("mine", 13, "kernel"), ("Memcpy DtoD (Device -> Device)", None, "gpu_memcpy")]
