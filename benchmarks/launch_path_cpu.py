"""The Python part of a warm labmagic launch, on any machine: what ``benchmarks/launch_overhead.py`` cannot separate.

A warm launch of a compiled kernel (``touch(x, y, n, grid=(1,), block=(1,))``, every argument checked) is labmagic's
Python (the call, the fast check, the stream, the packing, the launch record) around four things it does not own:
torch's answers about each tensor (dtype, is_cuda, is_contiguous(), data_ptr()), torch's current device and stream,
and the driver's ``cuLaunchKernel``. On a GPU, ``launch_overhead.py`` times the whole; here, without one, those four
are replaced by stand-ins that cost next to nothing (a tensor-like object with plain attributes, a stream and device
of 0, a launch that returns), so what is timed is labmagic's own code per call, the part a change to it can move.
The kernel itself is compiled for real (NVRTC), and its fast check and direct launcher are the ones a GPU run makes,
set up as a first checked call on a GPU would leave them.

Stand-ins live here only: no test uses them. The figures are host microseconds per call on this machine (median of
``--batches`` batches of ``--calls`` calls), to compare one version of labmagic with another on the same machine.

    python benchmarks/launch_path_cpu.py            # about 10 s, NVRTC needed (no GPU)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

import labmagic  # noqa: E402

TOUCH = r"""
extern "C" __global__ void touch(float* x, const float* y, int n) {
    if (threadIdx.x == 0 && n > 0) x[0] = y[0] + 1.0f;
}
"""


class _Function:
    """Stands in for the loaded CUfunction: the direct launcher reads its ``ptr``."""

    ptr = 0


def _stand_in_tensor_type(torch):
    class StandInTensor:
        """A float32 CUDA tensor as the fast check reads one, each answer a plain attribute or a cheap method."""

        dtype = torch.float32
        is_cuda = True

        def __init__(self, address: int):
            self._address = address

        def is_contiguous(self) -> bool:
            return True

        def data_ptr(self) -> int:
            return self._address

    return StandInTensor


def warm_kernel():
    """The compiled ``touch`` with its fast check and direct launcher as a first GPU launch leaves them, and the
    stand-in tensors its calls take."""
    import torch

    from labmagic.compiler import fast_check
    from labmagic.compiler import kernel as kernel_module
    from labmagic.compiler.direct_launch import DirectLaunch

    touch = labmagic.compile_cuda(TOUCH).touch
    tensor = _stand_in_tensor_type(torch)
    x, y = tensor(0x7F0000000000), tensor(0x7F0000000100)
    touch._first_fast_check((x, y, 1))  # the plans, compiled; the stand-in type not yet passed
    for plan in touch._plans:
        if plan.kind == fast_check.POINTER:
            plan.masks[torch.float32] = 3  # what a float32 tensor passing the full check teaches (4-byte aligned)
    fast_check.FAST_TENSOR_TYPES.add(tensor)
    values = touch._fast_check((x, y, 1))
    assert values is not None, "the fast check refused the stand-ins"
    touch._direct = DirectLaunch(_Function(), values, launch=lambda *args: None, device=0, error=())
    kernel_module._device_and_stream = lambda: (lambda: 0, lambda device: 0)  # torch's current device and stream
    kernel_module.has_gpu = lambda: True
    return touch, x, y


def per_call_us(call, calls: int, batches: int) -> float:
    for _ in range(min(calls, 2000)):
        call()
    times = []
    for _ in range(batches):
        start = time.perf_counter_ns()
        for _ in range(calls):
            call()
        times.append((time.perf_counter_ns() - start) / calls / 1e3)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--batches", type=int, default=15)
    args = parser.parse_args()
    from labmagic.compiler import faults

    touch, x, y = warm_kernel()
    grid = block = (1,)
    direct = touch._direct
    values = touch._fast_check((x, y, 1))
    rows = [
        ("warm launch: touch(x, y, 1, grid=(1,), block=(1,))", lambda: touch(x, y, 1, grid=grid, block=block)),
        ("fast check alone", lambda: touch._fast_check((x, y, 1))),
        ("direct launcher alone (pack, launch)", lambda: direct(values, (1, 1, 1), (1, 1, 1), 0, 0)),
        ("faults.record", lambda: faults.record("touch", (1, 1, 1), (1, 1, 1), 0)),
        ("an empty lambda (the loop's own cost)", lambda: None),
    ]
    print(f"labmagic's Python per warm launch, stand-ins for torch and the driver; Python {sys.version.split()[0]}")
    for label, call in rows:
        print(f"{per_call_us(call, args.calls, args.batches):8.3f} us  {label}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
