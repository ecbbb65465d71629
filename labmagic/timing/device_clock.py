"""Per-call device time from CUPTI activity records: which kernels belong to which timed call.

The ``cupti`` method of :class:`labmagic.timing.CudaTimer` runs its timed calls under
``torch.profiler`` with only CUDA activity enabled. Kineto records, through CUPTI's activity API,
the start and end of every kernel, memcpy and memset of the process on the device's own clock,
JAX's and XLA's included (they share the device's primary context). The timer brackets each call
with two marker kernels (``torch.cuda._sleep``, whose kernel is named ``spin_kernel``), launched
with the device drained before and after the call, so on the device timeline each call's work lies
strictly between its pair of markers, and the L2 eviction between calls lies outside every pair.

This module only reads the records: it knows nothing of torch, so the splitting is tested on
synthetic event lists.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

MARKER = "spin_kernel"
# Chrome-trace categories of device work in Kineto's export; annotations and host API calls are not work.
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


@dataclass(frozen=True)
class DeviceEvent:
    """One activity on the device: name, start and end in microseconds of the device clock; the CUDA stream it ran
    on (CUPTI's stream id) and its trace category (``kernel``, ``gpu_memcpy``, ``gpu_memset``), where known."""

    name: str
    start_us: float
    end_us: float
    stream: int | None = None
    category: str = ""


def read_trace(path: str | Path) -> list[DeviceEvent]:
    """The device activities in a Kineto chrome trace (``profile.export_chrome_trace``)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    return device_events(events)


def device_events(trace_events: list[dict]) -> list[DeviceEvent]:
    """Complete (``"ph": "X"``) device activities of a chrome trace's ``traceEvents``, in start order."""
    found = []
    for ev in trace_events:
        if ev.get("ph") != "X" or ev.get("cat", "").lower() not in DEVICE_CATEGORIES:
            continue
        start = float(ev["ts"])
        stream = (ev.get("args") or {}).get("stream")
        found.append(DeviceEvent(str(ev.get("name", "")), start, start + float(ev.get("dur", 0.0)),
                                 int(stream) if isinstance(stream, (int, float)) else None,
                                 ev.get("cat", "").lower()))
    return sorted(found, key=lambda e: e.start_us)


def call_spans_ms(events: list[DeviceEvent], calls: int, marker: str = MARKER) -> list[float] | None:
    """Device time of each of the last ``calls`` bracketed calls: first start to last end of the work
    between a call's opening and closing marker, in ms.

    The timer brackets ``calls + 1`` calls, the first one untimed, so that markers lost while CUPTI
    starts up (they would belong to that first call) cannot shift the pairing of the timed ones: the
    last ``2 * calls`` markers are paired. ``None`` when the records cannot be trusted: fewer than
    ``2 * calls`` or more than ``2 * calls + 2`` markers (CUPTI busy, e.g. under Nsight Compute, records
    lost, or a variant that launches ``spin_kernel`` itself), or a call with no device work inside its
    pair (its kernels were not recorded).
    """
    if calls <= 0:
        return None
    ordered = sorted(events, key=lambda e: e.start_us)
    markers = [e for e in ordered if marker in e.name]
    if not 2 * calls <= len(markers) <= 2 * calls + 2:
        return None
    markers = markers[-2 * calls:]
    work = [e for e in ordered if marker not in e.name]
    spans = []
    for opening, closing in zip(markers[::2], markers[1::2]):
        inside = [e for e in work if opening.end_us <= e.start_us and e.end_us <= closing.start_us]
        if not inside:
            return None
        start = min(e.start_us for e in inside)
        end = max(e.end_us for e in inside)
        spans.append((end - start) / 1e3)
    return spans
