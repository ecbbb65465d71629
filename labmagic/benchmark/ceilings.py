"""What this GPU really reaches, measured once by ``labmagic calibrate`` into ``results/<gpu>/ceilings.json``.

Two ceilings bound every kernel in the book:

- ``copy_gbps``: a device-to-device ``Tensor.copy_`` of a buffer far larger than the L2, counting bytes
  read *plus* bytes written (the same accounting as a race's ``nbytes``), so a vector add that moves
  ``12 n`` bytes is compared with a copy that moves ``8 n``, byte for byte. HBM reads cost less than
  writes, so a copy (one read per write) is not the fastest pattern: a vector add (two reads per
  write) beats it by a few percent on an H200. ``add_gbps`` (``torch.add``, 2:1) and ``read_gbps``
  (a ``sum``, reads only) are measured too, and ``peak_gbps``, the best of the three, is the memory
  ceiling that ``%bench`` judges against, so no honest kernel lands above its own floor.
- ``matmul_tflops[dtype]``: a square cuBLAS matmul (``2 n^3`` FLOPs) per dtype: fp32 with TF32 off (the
  CUDA-core rate), tf32, bf16, fp16, int8 (``torch._int_mm``) and fp8 (``torch._scaled_mm``, on GPUs that
  have it). A dtype the GPU or this torch cannot do is left out, and said so.

Timing uses :class:`labmagic.timing.CudaTimer`, the same clock as ``%bench``.
"""

from __future__ import annotations

import sys

from ..timing import CudaTimer
from . import provenance


def measure_memory_gbps(mib: int, timer) -> dict[str, float]:
    """GB/s (read + written) of a copy, an add and a read-only sum over ``mib`` MiB of float32."""
    import torch

    n = mib * 2**20 // 4
    a = torch.randn(n, device="cuda")
    b, c = torch.randn_like(a), torch.empty_like(a)
    gbps = {}
    for name, fn, args, moved in (
        ("copy", lambda s, d: d.copy_(s), (a, c), 8 * n),
        ("add", lambda x, y, z: torch.add(x, y, out=z), (a, b, c), 12 * n),
        ("read", torch.sum, (a,), 4 * n),
    ):
        timing = timer.time(fn, [args], set_bytes=moved)
        gbps[name] = moved / (timing.median_ms * 1e-3) / 1e9
    return gbps


def matmul_call(dtype: str, n: int, dev: str = "cuda"):
    """(fn, inputs) computing one n x n x n product in ``dtype``, or raise if unsupported."""
    import torch

    if dtype in ("fp32", "tf32"):
        a, b = (torch.randn(n, n, device=dev) for _ in range(2))
        return torch.mm, (a, b)
    if dtype in ("bf16", "fp16"):
        t = torch.bfloat16 if dtype == "bf16" else torch.float16
        a, b = (torch.randn(n, n, device=dev, dtype=t) for _ in range(2))
        return torch.mm, (a, b)
    if dtype == "int8":
        # Both operands K-major (B column-major), the one layout cuBLASLt's int8 tensor-core kernels take; a
        # row-major B sends torch._int_mm to a kernel several times slower (128.7 TOP/s on an H200).
        a = torch.randint(-8, 8, (n, n), device=dev, dtype=torch.int8)
        b = torch.randint(-8, 8, (n, n), device=dev, dtype=torch.int8).t()
        return torch._int_mm, (a, b)
    if dtype == "fp8":
        a = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn).t()  # _scaled_mm wants column-major B
        one = torch.ones((), device=dev)
        return (lambda x, y: torch._scaled_mm(x, y, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)), (a, b)
    raise ValueError(f"unknown dtype {dtype}")


def measure_matmul_tflops(dtype: str, n: int, timer) -> float:
    import torch

    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    try:
        fn, inputs = matmul_call(dtype, n)
        timing = timer.time(fn, [inputs], set_bytes=0)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return 2 * n**3 / (timing.median_ms * 1e-3) / 1e12


def measure_ceilings(copy_mib: int, matmul_n: int, dtypes: list[str], rep_ms: float) -> dict:
    """Every ceiling, printed as it is measured, as the ``ceilings.json`` record (a dtype that fails is skipped,
    with the reason)."""
    timer = CudaTimer(rep_ms=rep_ms, use_graphs=False)
    memory = measure_memory_gbps(copy_mib, timer)
    for name, value in memory.items():
        print(f"{name}: {value:,.0f} GB/s (read + write)")
    matmul, skipped = {}, {}
    for dtype in dtypes:
        try:
            matmul[dtype] = measure_matmul_tflops(dtype, matmul_n, timer)
            print(f"matmul {dtype}: {matmul[dtype]:,.1f} TFLOP/s")
        except Exception as exc:  # noqa: BLE001 - an unsupported dtype is a note, not a failure
            skipped[dtype] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]
            print(f"matmul {dtype}: skipped ({skipped[dtype]})", file=sys.stderr)
    return {
        "copy_gbps": round(memory["copy"], 1),
        "add_gbps": round(memory["add"], 1),
        "read_gbps": round(memory["read"], 1),
        "peak_gbps": round(max(memory.values()), 1),
        "matmul_tflops": {k: round(v, 2) for k, v in matmul.items()},
        "skipped": skipped,
        "method": {"copy_mib": copy_mib, "matmul_n": matmul_n, "timer": "cuda_event"},
        "provenance": provenance.collect(),
    }
