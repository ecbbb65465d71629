"""Chapter 02's tile shapes scheduled two ways, data-parallel and stream-K, raced against cuBLAS.

The question this answers: how much of the gap to cuBLAS is the wave tail? At 4096^3 a 128x256 tile
makes 512 tiles for 132 SMs holding one block each: 3.88 waves, so the last wave leaves 16 SMs idle.
Stream-K (rung 9) shares the last partial wave, and ``sk_waves`` full waves before it, out by K
iterations instead.

The script runs the chapter's own code: it replays ``book/02_sgemm.ipynb`` up to its ``%bench`` cell
(``labmagic.chapter.load_chapter``) and uses its ``async_launcher``, ``streamk_launcher``, ``check``
and ``make_inputs``. Every launcher is checked on the chapter's odd shapes and on a shape whose tile
count leaves a partial wave, then timed with ``%bench``'s timer (``labmagic.timing.CudaTimer``), with
cuBLAS timed before and after each row. ``--baseline CELL.cu`` also times the ``sgemm_async``
instances of an older version of the rung-8 cell (for instance the one a refactor replaced).
Writes ``results/<gpu>/sgemm_schedule.csv``.

    python benchmarks/sgemm_schedule.py [--sizes 2048,4096,8192] [--baseline OLD_CELL.cu]
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TAIL_SHAPE = (3000, 4000, 300)  # 24 x 16 tiles of 128x256: two waves whole, the rest split; K crosses tiles
SK_WAVES = (0, 1, None)  # full waves shared out besides the partial one (None: every tile)


def schedules(ns: dict, baseline) -> list[tuple[str, tuple, object, object]]:
    """(schedule, config, launcher, kernel) for every row to time."""
    rows = [("data-parallel", cfg, ns["async_launcher"](cfg), ns["async_module"][ns["_expr"]("sgemm_async", cfg)])
            for cfg in ns["CONFIGS"]]
    for cfg in ns["STREAMK_CONFIGS"]:
        kernel = ns["async_module"][ns["_expr"]("sgemm_streamk", cfg)]
        for waves in SK_WAVES:
            name = "stream-K, all tiles" if waves is None else f"stream-K, sk_waves={waves}"
            rows.append((name, cfg, ns["streamk_launcher"](cfg, sk_waves=waves), kernel))
    if baseline is not None:
        for cfg in ns["CONFIGS"]:
            kernel = baseline[ns["_expr"]("sgemm_async", cfg)]
            rows.append(("baseline data-parallel", cfg, _grid_launcher(ns, kernel, cfg), kernel))
    return rows


def _grid_launcher(ns: dict, kernel, cfg):
    threads, smem = ns["_threads_smem"](cfg)
    cdiv = ns["cdiv"]

    def launch(A, B, out=None):
        (M, K), N = A.shape, B.shape[1]
        C = ns["_out"](A, B, out)
        kernel(A, B, C, M, N, K, grid=(cdiv(N, cfg[1]), cdiv(M, cfg[0])), block=threads, smem=smem)
        return C
    return launch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2048,4096,8192")
    parser.add_argument("--baseline", type=Path, help="an older rung-8 cell (CUDA source, no magic line)")
    args = parser.parse_args()
    start = time.perf_counter()

    from labmagic import kernel as lab_kernel
    from labmagic import nvrtc
    from labmagic.chapter import load_chapter
    from labmagic.paths import results_dir
    from labmagic.provenance import collect
    from labmagic.timing import CudaTimer

    ns = load_chapter("02_sgemm", parameters={"size": "quick"})
    print(f"chapter replayed in {time.perf_counter() - start:.0f} s; NVRTC {nvrtc.nvrtc_version()}", flush=True)
    baseline = None
    if args.baseline:
        exprs = tuple(ns["_expr"]("sgemm_async", cfg) for cfg in ns["CONFIGS"])
        baseline = lab_kernel.compile_module(args.baseline.read_text(), name_expressions=exprs)

    rows = []
    for name, cfg, launch, kern in schedules(ns, baseline):
        res = kern.resources
        shapes = [*ns["CHECK_SHAPES"], TAIL_SHAPE]
        try:
            for i, (M, N, K) in enumerate(shapes):
                ns["check"](launch, M, N, K, seed=31 * i + 5)
        except AssertionError as exc:
            print(f"{name} {cfg} FAILS the check: {str(exc).splitlines()[0]}", flush=True)
            continue
        rows.append({"schedule": name, "config": " ".join(map(str, cfg)), "registers": res.registers,
                     "spill_bytes": res.spill_stores + res.spill_loads, "launch": launch})
    print(f"{len(rows)} launchers passed the checks at {time.perf_counter() - start:.0f} s", flush=True)

    timer = CudaTimer()
    torch_mm = ns["torch_mm"]
    out = []
    for n in (int(s) for s in args.sizes.split(",")):
        inputs = [ns["make_inputs"](n, n, n)]
        for row in rows:
            before = timer.time(torch_mm, inputs).median_ms
            ours = timer.time(row["launch"], inputs).median_ms
            after = timer.time(torch_mm, inputs).median_ms
            cublas = (before + after) / 2
            rec = {k: v for k, v in row.items() if k != "launch"}
            rec.update(size=n, ms=round(ours, 4), tflops=round(2 * n**3 / ours / 1e9, 2), cublas_ms=round(cublas, 4),
                       pct_of_cublas=round(100 * cublas / ours, 1))
            out.append(rec)
            print(f"{n:>5} {rec['schedule']:<24} {rec['config']:<26} {rec['tflops']:6.2f} TFLOP/s "
                  f"{rec['pct_of_cublas']:5.1f}% of cuBLAS ({cublas:.4f} ms)", flush=True)
        del inputs

    prov = collect()
    path = results_dir() / "sgemm_schedule.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        fields = [*out[0], "nvrtc", *prov]
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for rec in out:
            w.writerow({**rec, "nvrtc": nvrtc.nvrtc_version(), **prov})
    print("wrote", path, f"in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
