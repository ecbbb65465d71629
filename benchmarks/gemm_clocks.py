"""What the SM clock and board power do while chapter 06's best GEMMs run, sustained and in ``%bench``'s race.

Chapter 06's %bench run measured cuBLAS 11% slower at 8192^3 than at 4096^3 while Triton's TMA kernel lost
1%. At 700 W an H200 lowers its clock when a kernel draws more power, so a kernel's TFLOP/s at a size that runs
long enough to heat the board is partly a power question. Two modes:

- sustained (default): each variant in a loop for a few seconds (the same inputs, no L2 eviction: the question
  is sustained draw, not one call), ``nvidia-smi`` sampled every 100 ms; the median SM clock, power and
  TFLOP/s of the loop, and the work per clock cycle (TFLOP/s / GHz), which separates a slower clock from a
  slower kernel. Writes ``results/<gpu>/gemm_clocks.csv``.
- ``--race``: each variant timed exactly as ``%bench`` times it (:class:`labmagic.timing.CudaTimer`: L2
  eviction, a short sleep, events around each call, about 100 ms of calls), in the race's order, then in the
  reverse order, then interleaved (a few calls of each variant in turn, rotating which goes first), while NVML
  is sampled every few milliseconds: the SM clock, the power and the reasons the clock is held down, each
  sample given to the variant whose timing window it falls in. If a kernel's TFLOP/s in the race depends on
  where it runs in the order, the race ranks power states, not kernels. Writes
  ``results/<gpu>/gemm_race_clocks.csv``.

It replays ``book/06_tensor_core_gemm.ipynb`` up to its first ``%bench`` cell (size "quick") and uses the
chapter's launchers (a DSL variant whose package is not installed is left out).

- ``--orders``: the chapter's square race in rounds (``Race(rounds=16, rep_ms=400)``), the rounds' order rotated
  as the race, reversed, and shuffled with two seeds (:func:`order_rows`). Writes
  ``results/<gpu>/gemm_round_orders.csv``.

    python benchmarks/gemm_clocks.py [--race | --orders] [--shapes 8192 4096]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VARIANTS = ("torch_cublas", "cuda_wgmma_store", "cuda_wgmma_store_cluster", "triton_tma", "gluon_gemm",
            "tilelang_gemm", "cutedsl_gemm")
SECONDS = 4.0
# NVML's clock-event reasons (nvmlClocksEventReason*): the bits that say why the SM clock is below its maximum.
REASONS = {"power": 0x4, "hw_slowdown": 0x8, "sw_thermal": 0x20, "hw_thermal": 0x40, "hw_power_brake": 0x80}


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


class NvmlSampler(threading.Thread):
    """NVML read every ``period_s`` on a thread: (host time, SM MHz, W, clock-event reason bits, deg C)."""

    def __init__(self, period_s: float = 0.005):
        super().__init__(daemon=True)
        import pynvml

        self.nvml = pynvml
        pynvml.nvmlInit()
        self.handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        self.period_s = period_s
        self.samples: list[tuple[float, float, float, int, float]] = []
        self._halt = threading.Event()
        reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        self._reasons = reasons or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons

    def run(self) -> None:
        nv, h = self.nvml, self.handle
        while not self._halt.is_set():
            self.samples.append((time.perf_counter(), nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
                                 nv.nvmlDeviceGetPowerUsage(h) / 1e3, self._reasons(h),
                                 nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)))
            time.sleep(self.period_s)

    def stop(self) -> None:
        self._halt.set()
        self.join()
        self.nvml.nvmlShutdown()

    def window(self, t0: float, t1: float) -> dict[str, float]:
        """Medians of the samples in [t0, t1], and the share of them held down for each reason."""
        inside = [s for s in self.samples if t0 <= s[0] <= t1]
        if not inside:
            return {"sm_mhz": float("nan"), "power_w": float("nan"), "temp_c": float("nan"), "nvml_samples": 0}
        out = {"sm_mhz": statistics.median(s[1] for s in inside), "power_w": statistics.median(s[2] for s in inside),
               "temp_c": statistics.median(s[4] for s in inside), "nvml_samples": len(inside)}
        for name, bit in REASONS.items():
            out[f"share_{name}"] = sum(1 for s in inside if s[3] & bit) / len(inside)
        return out


def race_rows(ns: dict, names: list[str], n: int, sampler: NvmlSampler) -> list[dict]:
    """Time each variant at n^3 as %bench does, forward, reversed and interleaved; one row per timing."""
    from labmagic.timing import CudaTimer, round_orders

    sets = [ns["make_inputs"](n, n, n) for _ in range(2)]
    flops = 2 * n ** 3
    rows = []

    def timed(order: str, position: int, name: str, timer: CudaTimer) -> None:
        t0 = time.perf_counter()
        timing = timer.time(ns[name], sets)
        t1 = time.perf_counter()
        med = statistics.median(timing.times_ms)
        clocks = sampler.window(t0, t1)
        tflops = flops / med / 1e9
        rows.append({"order": order, "position": position, "variant": name, "shape": f"{n}x{n}x{n}",
                     "calls": len(timing.times_ms), "ms_median": f"{med:.4f}", "ms_min": f"{min(timing.times_ms):.4f}",
                     "tflops": f"{tflops:.1f}", "tflops_best": f"{flops / min(timing.times_ms) / 1e9:.1f}",
                     "sm_mhz_median": f"{clocks['sm_mhz']:.0f}", "power_w_median": f"{clocks['power_w']:.0f}",
                     "tflop_per_ghz": f"{tflops / (clocks['sm_mhz'] / 1000):.1f}",
                     "temp_c": f"{clocks['temp_c']:.0f}", "nvml_samples": clocks["nvml_samples"],
                     **{k: f"{v:.2f}" for k, v in clocks.items() if k.startswith("share_")}})
        r = rows[-1]
        print(f"{order:<11} {position:>2} {name:<26} {n}^3 {r['tflops']:>7} TFLOP/s (best {r['tflops_best']:>6})"
              f"  SM {r['sm_mhz_median']:>5} MHz  {r['power_w_median']:>4} W  {r['temp_c']} C"
              f"  {r['tflop_per_ghz']:>6} /GHz  power-capped {r.get('share_power', '-')}", flush=True)

    race = CudaTimer()  # %bench's defaults: ~25 ms of warm-up, ~100 ms of calls
    for i, name in enumerate(names):
        timed("forward", i, name, race)
    for i, name in enumerate(reversed(names)):
        timed("reverse", i, name, race)
    short = CudaTimer(rep_ms=12.0, warmup_ms=3.0, min_reps=8)
    for order in round_orders(names, len(names) * 2):
        for i, name in enumerate(order):
            timed("interleaved", i, name, short)
    return rows


def order_rows(ns: dict, n: int, rounds: int = 16, rep_ms: float = 400.0) -> list[dict]:
    """The chapter's square race at n^3 as ``Race(rounds=16, rep_ms=400)`` times it (:func:`time_in_rounds`), under
    four orders of the rounds: rotated in the race's order (each variant always after the same one), rotated
    in the reverse order, and two seeded shuffles (a fresh permutation per round). If a kernel's share of cuBLAS
    depends on which of these ran, the rotation carries a bias from the variant timed before it."""
    from labmagic.benchmark.race import JAX_BACKENDS
    from labmagic.timing import CudaTimer, time_in_rounds

    race = ns["race_square"]
    calls = {name: fn for name, fn in race.variants.items()
             if not getattr(fn, "labmagic_stand_in", False) and race.backend(name) not in JAX_BACKENDS}
    sets = [ns["make_inputs"](n, n, n) for _ in range(2)]
    rows = []
    orders = [("rotated", list(calls), None), ("rotated_reversed", list(reversed(calls)), None),
              ("shuffled_seed0", list(calls), 0), ("shuffled_seed1", list(calls), 1)]
    for label, names, seed in orders:
        timer = CudaTimer(rep_ms=rep_ms)
        timings = time_in_rounds(timer, {name: calls[name] for name in names}, sets, rounds, shuffle=seed)
        ref = statistics.median(timings["torch"].times_ms)
        for name in calls:
            timing = timings[name]
            if isinstance(timing, Exception):
                print(f"{label:<17} {name:<26} {type(timing).__name__}: {timing}")
                continue
            med = statistics.median(timing.times_ms)
            rows.append({"order": label, "variant": name, "shape": f"{n}x{n}x{n}", "rounds": rounds,
                         "calls": len(timing.times_ms), "ms_median": f"{med:.4f}",
                         "tflops": f"{2 * n ** 3 / med / 1e9:.1f}", "vs_cublas": f"{ref / med:.4f}",
                         "method": timing.method})
            r = rows[-1]
            print(f"{label:<17} {name:<26} {n}^3 {r['tflops']:>7} TFLOP/s  {float(r['vs_cublas']):6.3f}x cuBLAS",
                  flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--race", action="store_true", help="time as %%bench does, in three orders, NVML sampled")
    parser.add_argument("--orders", action="store_true",
                        help="the square race in 16 rounds, rotated, reversed and shuffled (see order_rows)")
    parser.add_argument("--shapes", type=int, nargs="+", default=[8192, 4096], help="square sizes (default 8192 4096)")
    args = parser.parse_args()
    import labmagic

    if not labmagic.has_gpu():
        print("no GPU: this script measures clocks and power on one")
        return
    from labmagic.child.replay import load_chapter
    from labmagic.paths import results_dir
    from labmagic.store.table_csv import write_table

    ns = load_chapter("06_tensor_core_gemm", parameters={"size": "quick"})
    def runs(v: str) -> bool:  # defined, and not a skipped DSL's stand-in
        return v in ns and not getattr(ns[v], "labmagic_stand_in", False)

    names = [v for v in VARIANTS if runs(v)]
    missing = [v for v in VARIANTS if not runs(v)]
    if missing:
        print(f"not defined in this environment (a DSL not installed): {', '.join(missing)}")
    rows = []
    if args.orders:
        for n in args.shapes:
            rows.extend(order_rows(ns, n))
        print(f"wrote {write_table(rows, results_dir() / 'gemm_round_orders.csv')}")
        return
    if args.race:
        sampler = NvmlSampler()
        sampler.start()
        try:
            for n in args.shapes:
                rows.extend(race_rows(ns, names, n, sampler))
        finally:
            sampler.stop()
        print(f"wrote {write_table(rows, results_dir() / 'gemm_race_clocks.csv')}")
        return
    for n in args.shapes:
        A, B = ns["make_inputs"](n, n, n)
        for name in names:
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
