"""On a GPU: which kernels a submission's call launched, on which streams, and whether it copied memory.

One call runs under ``torch.profiler`` with CUDA activity, whose Kineto backend reads CUPTI's records of every
kernel, memcpy and memset of the process with the stream each ran on. Right before the call the judge launches a
marker kernel (``torch.cuda._sleep``, :data:`labmagic.timing.device_clock.MARKER`) on the current stream; after it, it
drains the device. Everything else recorded is the call's work, and:

- a kernel that is not one of the submission's own (a ``%%cuda_kernel`` kernel or a ``@triton.jit`` function of its
  cells, matched by name) and not a fill of an allocation is another library's: cuBLAS's, torch's, CuPy's;
- a kernel on a stream other than the marker's ran outside the stream the caller orders work on (its result is
  not ordered before what the caller does next, and a timer on the current stream does not see it);
- a memcpy moved the data through the host or copied it on the device rather than computing it.

Limits: a foreign kernel named like one of the submission's own would pass as its own (the names are the
submission's to choose); work on another stream that is still running when the device is drained is recorded,
work launched after the call returns (from a thread) is not.
"""

from __future__ import annotations

import re
import tempfile
import warnings
from pathlib import Path

from ..timing.device_clock import MARKER, DeviceEvent, read_trace

#: Kernels any submission may cause: torch filling an allocation (``torch.zeros``, ``fill_``) and memsets.
FILL_KERNELS = re.compile(r"FillFunctor|fill_kernel|[Mm]emset")


def trace_call(call) -> list[DeviceEvent]:
    """The device work of ``call()``, bracketed by an opening marker on the current stream."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Profiler clears events")
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            torch.cuda._sleep(1000)
            call()
            torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        return read_trace(path)


def is_own(name: str, own_names: set[str]) -> bool:
    """Is the traced kernel ``name`` one of the submission's (a whole-word match of one of its kernel names)?"""
    return any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(own)}(?![A-Za-z0-9_])", name) for own in own_names if own)


def problems(events: list[DeviceEvent], own_names: set[str]) -> tuple[list[str], list[str]]:
    """(refusals, notes) read from a call's trace: foreign kernels, other streams, memcpys."""
    markers = [e for e in events if MARKER in e.name]
    if not markers:
        return [], ["kernel trace: the profiler recorded no marker kernel (CUPTI busy?): kernels and streams not "
                    "checked"]
    current = markers[0].stream
    work = [e for e in events if MARKER not in e.name]
    foreign = sorted({e.name for e in work if e.category == "kernel" and not is_own(e.name, own_names)
                      and not FILL_KERNELS.search(e.name)})
    elsewhere = sorted({e.stream for e in work if e.stream is not None and current is not None
                        and e.stream != current})
    copies = sorted({e.name for e in work if e.category == "gpu_memcpy"})
    refusals = []
    if foreign:
        refusals.append(f"launches kernels that are not its own: {', '.join(_short(n) for n in foreign[:3])}"
                        + (f" (+{len(foreign) - 3} more)" if len(foreign) > 3 else "")
                        + ": another library (or the reference) did the work")
    if elsewhere:
        refusals.append(f"launches work on another stream ({', '.join(map(str, elsewhere))}, not the current "
                        f"stream {current}): work must be ordered on the caller's stream")
    if copies:
        refusals.append(f"copies memory ({', '.join(copies[:2])}): the result must come from its kernels")
    return refusals, []


def _short(name: str, limit: int = 80) -> str:
    return name if len(name) <= limit else name[: limit - 3] + "..."
