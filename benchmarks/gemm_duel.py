"""Is chapter 06's best CUDA rung ahead of Triton's TMA kernel at 8192^3, or level with it?

Three sweeps of the chapter's square race ranked rung 6 against ``triton_tma`` three ways at 8192^3 (+0.2%, +2.9%,
-2.2%), each within the race's intervals. That race times fifteen variants in shuffled rounds, some slow and cool
(WMMA, ``mma.sync``), so the board's power state before each turn differs with the mix. This script races only the
contenders and the reference, all of which hold the 700 W cap: cuBLAS, rung 6 (``cuda_wgmma_store``), rung 7
(``cuda_wgmma_store_cluster``) and ``triton_tma``, in ``ROUNDS`` shuffled rounds of ``REP_MS`` ms each variant
(the chapter's race: 16 rounds, 400 ms), repeated with ``REPEATS`` shuffle seeds. Each repetition gives every
variant's median and its ratio to ``triton_tma`` with the 95% interval the race tables use
(:func:`labmagic.timing.noise.ratio_interval`): the rung is ahead in a repetition when the interval lies above 1, and
ahead at this size when it is so in every repetition.

It replays ``book/06_tensor_core_gemm.ipynb`` up to its first ``%bench`` cell (size "quick") and uses the
chapter's launchers, every one checked against an fp64 product first. Writes ``results/<gpu>/gemm_duel.csv``.

    python benchmarks/gemm_duel.py [--size 8192] [--repeats 6]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VARIANTS = ("torch_cublas", "cuda_wgmma_store", "cuda_wgmma_store_cluster", "triton_tma")
AGAINST = "triton_tma"
ROUNDS, REP_MS, REPEATS = 32, 1600.0, 6


def verdict(low: float | None, high: float | None) -> str:
    """Where a ratio's interval lies: "ahead" above 1, "behind" below, "level" across it."""
    if low is None or high is None:
        return "unknown"
    return "ahead" if low > 1 else "behind" if high < 1 else "level"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=8192, help="the square size n of n^3 (default 8192)")
    parser.add_argument("--repeats", type=int, default=REPEATS, help=f"shuffle seeds (default {REPEATS})")
    args = parser.parse_args(argv)
    import labmagic

    if not labmagic.has_gpu():
        print("no GPU: the race needs one")
        return 0

    from labmagic.child.replay import load_chapter
    from labmagic.paths import results_dir
    from labmagic.store.table_csv import write_table
    from labmagic.timing import CudaTimer, time_in_rounds
    from labmagic.timing.noise import ratio_interval

    ns = load_chapter("06_tensor_core_gemm", parameters={"size": "quick"})
    n = args.size
    for name in VARIANTS:  # the chapter's check, on a shape that divides no tile
        ns["check"](ns[name], 257, 385, 4104, seed=11)
    calls = {name: ns[name] for name in VARIANTS}
    sets = [ns["make_inputs"](n, n, n) for _ in range(2)]
    rows = []
    for seed in range(args.repeats):
        timings = time_in_rounds(CudaTimer(rep_ms=REP_MS), calls, sets, ROUNDS, shuffle=seed)
        failed = {k: v for k, v in timings.items() if isinstance(v, Exception)}
        if failed:
            raise SystemExit(f"seed {seed}: {failed}")
        against = timings[AGAINST].times_ms
        for name in VARIANTS:
            times = timings[name].times_ms
            med = statistics.median(times)
            low, high = ratio_interval(against, times) or (None, None)
            rows.append({"seed": seed, "variant": name, "shape": f"{n}x{n}x{n}", "rounds": ROUNDS, "calls": len(times),
                         "ms_median": f"{med:.4f}", "tflops": f"{2 * n ** 3 / med / 1e9:.1f}",
                         f"vs_{AGAINST}": f"{statistics.median(against) / med:.4f}",
                         "low": f"{low:.4f}" if low else "", "high": f"{high:.4f}" if high else "",
                         "verdict": verdict(low, high) if name != AGAINST else "", "method": timings[name].method})
            r = rows[-1]
            print(f"seed {seed}  {name:<26} {r['tflops']:>7} TFLOP/s  {float(r[f'vs_{AGAINST}']):.4f}x {AGAINST} "
                  f"[{r['low']}, {r['high']}] {r['verdict']}", flush=True)
    for name in VARIANTS:
        if name == AGAINST:
            continue
        mine = [r for r in rows if r["variant"] == name]
        counts = {v: sum(r["verdict"] == v for r in mine) for v in ("ahead", "level", "behind")}
        ratios = sorted(float(r[f"vs_{AGAINST}"]) for r in mine)
        print(f"{name:<26} against {AGAINST}: median ratio {statistics.median(ratios):.4f} "
              f"(from {ratios[0]:.4f} to {ratios[-1]:.4f}); {counts}")
    print(f"wrote {write_table(rows, results_dir() / 'gemm_duel.csv')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
