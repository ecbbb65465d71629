"""What the SM clock and board power do while chapter 06's best GEMMs run back to back at 8192^3 and 4096^3.

Chapter 06's %bench run measured cuBLAS 11% slower at 8192^3 than at 4096^3 while Triton's TMA kernel lost
1%. At 700 W an H200 lowers its clock when a kernel draws more power, so a kernel's TFLOP/s at a size that runs
long enough to heat the board is partly a power question. This script runs each variant in a loop for a few
seconds (the same inputs, no L2 eviction: the question is sustained draw, not one call), samples
``nvidia-smi`` every 100 ms meanwhile, and reports the median SM clock, power and TFLOP/s of the loop, and the
work per clock cycle (TFLOP/s / GHz), which separates a slower clock from a slower kernel.

It replays ``book/06_tensor_core_gemm.ipynb`` up to its first ``%bench`` cell (size "quick") and uses the
chapter's launchers. Writes ``results/<gpu>/gemm_clocks.csv``.

    python benchmarks/gemm_clocks.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VARIANTS = ("torch_cublas", "cuda_wgmma_store", "cuda_wgmma_store_cluster", "triton_tma")
SECONDS = 4.0


def sampled(fn, args: tuple, seconds: float) -> tuple[float, list[tuple[float, float]]]:
    """Run ``fn(*args)`` back to back for ``seconds`` while nvidia-smi samples (SM MHz, W); (ms per call,
    samples)."""
    import torch

    fn(*args)  # Triton autotunes here, before the clock is sampled
    torch.cuda.synchronize()
    probe = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
                              "-lms", "100"], stdout=subprocess.PIPE, text=True)
    calls, start = 0, time.perf_counter()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    while time.perf_counter() - start < seconds:
        for _ in range(10):
            fn(*args)
        calls += 10
        torch.cuda.synchronize()
    end.record()
    torch.cuda.synchronize()
    probe.terminate()
    out, _ = probe.communicate()
    samples = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2:
            try:
                samples.append((float(parts[0]), float(parts[1])))
            except ValueError:
                continue
    return begin.elapsed_time(end) / calls, samples[len(samples) // 4:]  # the first quarter: still heating


def main() -> None:
    import labmagic

    if not labmagic.has_gpu():
        print("no GPU: this script measures clocks and power on one")
        return
    from labmagic.child.replay import load_chapter
    from labmagic.paths import results_dir
    from labmagic.store.table_csv import write_table

    ns = load_chapter("06_tensor_core_gemm", parameters={"size": "quick"})
    rows = []
    for n in (8192, 4096):
        A, B = ns["make_inputs"](n, n, n)
        for name in VARIANTS:
            ms, samples = sampled(ns[name], (A, B), SECONDS)
            mhz = statistics.median(s[0] for s in samples)
            watts = statistics.median(s[1] for s in samples)
            tflops = 2 * n ** 3 / ms / 1e9
            rows.append({"variant": name, "shape": f"{n}x{n}x{n}", "seconds": SECONDS, "ms_per_call": f"{ms:.4f}",
                         "tflops": f"{tflops:.1f}", "sm_mhz_median": f"{mhz:.0f}", "power_w_median": f"{watts:.0f}",
                         "tflop_per_ghz": f"{tflops / (mhz / 1000):.1f}", "samples": len(samples)})
            print(f"{name:<26} {n}^3  {tflops:7.1f} TFLOP/s  SM {mhz:5.0f} MHz  {watts:4.0f} W  "
                  f"{tflops / (mhz / 1000):6.1f} TFLOP/s per GHz", flush=True)
    print(f"wrote {write_table(rows, results_dir() / 'gemm_clocks.csv')}")


if __name__ == "__main__":
    main()
