"""Timing one variant at one shape on the GPU's own clock, and how sure the result is.

:mod:`.timers` holds the timers (:class:`CudaTimer`, :class:`WallTimer`), the rounds a race takes its turns in and the
host's side of a timed row; :mod:`.device_clock` splits CUPTI's device records into timed calls (the ``cupti``
method); :mod:`.noise` gives a median, and the ratio of two, their distribution-free confidence intervals. Each
name below is importable from ``labmagic.timing`` itself, as it was before the three became one package.
"""

from .device_clock import DEVICE_CATEGORIES, MARKER, DeviceEvent, call_spans_ms, device_events, read_trace
from .noise import LEVEL, includes_one, median_interval, rank_for, ratio_interval
from .timers import (
    HOST_CALL_OVERHEAD_MS,
    HOST_CALLS,
    HOST_SHARE,
    NOT_CAPTURED,
    CudaTimer,
    HostTiming,
    Prepared,
    Timing,
    WallTimer,
    block_until_ready,
    first_cause,
    host_calls,
    is_jax_output,
    round_orders,
    time_host,
    time_in_rounds,
    warmup_calls,
)

__all__ = [
    "DEVICE_CATEGORIES", "HOST_CALLS", "HOST_CALL_OVERHEAD_MS", "HOST_SHARE", "LEVEL", "MARKER", "NOT_CAPTURED",
    "CudaTimer", "DeviceEvent", "HostTiming", "Prepared", "Timing", "WallTimer", "block_until_ready",
    "call_spans_ms", "device_events", "first_cause", "host_calls", "includes_one", "is_jax_output",
    "median_interval", "rank_for", "ratio_interval", "read_trace", "round_orders", "time_host", "time_in_rounds",
    "warmup_calls",
]
