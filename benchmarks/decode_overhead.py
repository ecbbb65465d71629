"""How much of a decode GEMM's time is fixed cost: chapter 06's decode variants at M = 1 token against a
4096-row weight whose K grows from 256 to 16384 (2 MB to 128 MB of weights).

Each call is timed as ``%bench`` times it (``CudaTimer``, the L2 evicted, enough input sets that the weights
cannot stay in L2), and a least-squares line ``time = fixed + bytes / bandwidth`` through the four points
separates what every call pays (launch, filling the pipeline, the split's reduction) from the streaming rate.
At the chapter's 32 MB weight (K = 4096) a 10 µs call spends whatever the fixed cost is out of it.

Two references get the same treatment, as the size-matched ceilings of a kernel that streams the weight's bytes:
``copy`` (torch ``copy_`` of a bf16 buffer half the weight's size: the weight's bytes of traffic, half read and
half written, as the chapter's 4,292 GB/s copy ceiling counts them at 2 GiB) and ``read`` (torch ``sum`` of a
bf16 buffer of the weight's size into an fp32 scalar: the bytes read once, nothing written back).

It replays ``book/06_tensor_core_gemm.ipynb`` up to its first ``%bench`` cell (size "quick") and uses the
chapter's launchers. Writes ``results/<gpu>/decode_overhead.csv``.

    python benchmarks/decode_overhead.py
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VARIANTS = ("torch_cublas", "cuda_splitk", "cuda_wgmma_decode", "triton_gemm")
REFERENCES = ("copy", "read")
N, KS = 4096, (256, 1024, 4096, 16384)


def reference(name: str, nbytes: int, device: str = "cuda"):
    """A reference call that streams `nbytes` (module docstring), and a function that makes one input set for it."""
    import torch

    def buffer(n):  # n bf16 elements, random (a copy of zeros is no faster, but nothing here should be zeros)
        return torch.randn(n, device=device).to(torch.bfloat16)

    if name == "copy":
        return (lambda src, dst: dst.copy_(src)), lambda: (buffer(nbytes // 4), buffer(nbytes // 4))
    if name == "read":
        return (lambda x: x.sum(dtype=torch.float32)), lambda: (buffer(nbytes // 2),)
    raise ValueError(f"no reference {name!r}; there are {REFERENCES}")


def line_fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares y = a + b x: (a, b)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def main() -> None:
    import labmagic

    if not labmagic.has_gpu():
        print("no GPU: the timings need one")
        return

    from labmagic.benchmark.runner import gpu_input_sets
    from labmagic.child.replay import load_chapter
    from labmagic.paths import results_dir
    from labmagic.store.table_csv import write_table
    from labmagic.timing import CudaTimer

    ns = load_chapter("06_tensor_core_gemm", parameters={"size": "quick"})
    timer = CudaTimer()
    rows = []
    for name in VARIANTS + REFERENCES:
        us, nbytes = [], []
        for K in KS:
            if name in VARIANTS:  # a decode call: the token, the weight and the output
                set_bytes, fn, make = 2 * (K + N * K + N), ns[name], functools.partial(ns["make_inputs"], 1, N, K)
            else:
                set_bytes, (fn, make) = 2 * N * K, reference(name, 2 * N * K)
            sets = gpu_input_sets(set_bytes, timer)
            t = timer.time(fn, [make() for _ in range(sets)], set_bytes=set_bytes)
            us.append(t.median_ms * 1e3)
            nbytes.append(2 * N * K)
            rows.append({"variant": name, "shape": f"1x{N}x{K}", "weight_mb": f"{2 * N * K / 2**20:.0f}",
                         "input_sets": sets, "median_us": f"{us[-1]:.2f}",
                         "gbps": f"{2 * N * K / (us[-1] * 1e3):.0f}", "timer": t.method})
        fixed, per_byte = line_fit(nbytes, us)
        for row in rows[-len(KS):]:
            row.update(fixed_us=f"{fixed:.2f}", stream_gbps=f"{1e-3 / per_byte:.0f}")
        print(f"{name:<20} " + "  ".join(f"K={K}: {u:7.2f} us" for K, u in zip(KS, us))
              + f"   fixed {fixed:.2f} us, streaming {1e-3 / per_byte:.0f} GB/s", flush=True)
    print(f"wrote {write_table(rows, results_dir() / 'decode_overhead.csv')}")


if __name__ == "__main__":
    main()
