"""Chapter 02's last rungs, version against version and schedule against schedule, raced against cuBLAS.

Two questions, one run:

- **The schedule.** At 4096^3 a 128x256 tile makes 512 tiles for 132 SMs holding one block each: 3.88
  waves, so the last wave leaves 16 SMs idle. How much does stream-K (rung 9: the partial wave, and
  ``sk_waves`` full waves before it, shared out by K iterations) win back?
- **The main loop.** Which version of the rung-8/9 cell's code is fastest? ``--source NAME=FILE`` adds a
  version (the cell's CUDA source without its magic line); the chapter's own cell is always raced,
  as ``chapter``.

It runs the chapter's own code: it replays ``book/02_sgemm.ipynb`` up to its ``%bench`` cell
(``labmagic.child.replay.load_chapter``) and uses its ``async_launcher``, ``streamk_launcher``, ``check`` and
``make_inputs``. Every launcher is checked on the chapter's odd shapes and on a shape whose tile count
leaves a partial wave, then timed with ``%bench``'s timer (``labmagic.timing.CudaTimer``), with cuBLAS
timed right before each row. ``--tune-cell`` also runs the chapter's autotune cell (a GPU smoke test of
it). Writes ``results/<gpu>/sgemm_schedule.csv``.

    python benchmarks/sgemm_schedule.py [--sizes 4096,8192] [--source old=old.cu] [--config 128,256,8,64,64,16,8,3]
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
SK_WAVES = (0, 1)  # full waves shared out by K iterations besides the partial one


def has_streamk(cfg) -> bool:
    """The chapter's rule for STREAMK_CONFIGS, for shapes outside its CONFIGS too: 16x8 outputs per thread."""
    return cfg[5:7] == (16, 8)


def expressions(ns: dict, configs) -> tuple[str, ...]:
    out = [ns["_expr"]("sgemm_async", cfg) for cfg in configs]
    out += [ns["_expr"]("sgemm_streamk", cfg) for cfg in configs if has_streamk(cfg)]
    return tuple(out)


def launchers(ns: dict, module, configs):
    """(schedule, config, launcher, kernel) for every instance the module holds."""
    for cfg in configs:
        yield ("data-parallel", cfg, ns["async_launcher"](cfg, module=module),
               module[ns["_expr"]("sgemm_async", cfg)])
        if has_streamk(cfg):
            for waves in SK_WAVES:
                yield (f"stream-K, sk_waves={waves}", cfg,
                       ns["streamk_launcher"](cfg, sk_waves=waves, module=module),
                       module[ns["_expr"]("sgemm_streamk", cfg)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4096,8192")
    parser.add_argument("--source", action="append", default=[], metavar="NAME=FILE",
                        help="another version of the rung-8/9 cell (CUDA source, no magic line)")
    parser.add_argument("--config", action="append", default=[], metavar="BM,BN,BK,WM,WN,TM,TN,STAGES",
                        help="tile shape to race (default: the chapter's CONFIGS)")
    parser.add_argument("--tune-cell", action="store_true", help="also run the chapter's autotune cell")
    args = parser.parse_args()
    start = time.perf_counter()

    from labmagic.benchmark.provenance import collect
    from labmagic.child.replay import code_cell, load_chapter
    from labmagic.compiler import kernel as lab_kernel
    from labmagic.compiler import nvrtc
    from labmagic.paths import results_dir
    from labmagic.timing import CudaTimer

    ns = load_chapter("02_sgemm", parameters={"size": "quick"})
    print(f"chapter replayed in {time.perf_counter() - start:.0f} s; NVRTC {nvrtc.nvrtc_version()}", flush=True)
    if args.tune_cell:
        exec(code_cell("02_sgemm", "def tune():"), ns)  # noqa: S102  (the chapter's own cell, as the notebook runs it)
        print(f"autotune cell ran at {time.perf_counter() - start:.0f} s", flush=True)
    configs = [tuple(int(x) for x in c.split(",")) for c in args.config] or list(ns["CONFIGS"])
    versions = {"chapter": None}
    for item in args.source:
        name, _, path = item.partition("=")
        versions[name] = Path(path).read_text()

    rows = []
    for version, source in versions.items():
        exprs = expressions(ns, configs)
        module = ns["async_module"]
        if source is not None or not all(e in module.kernels for e in exprs):
            module = lab_kernel.compile_module(source or module.source, name_expressions=exprs)
        for schedule, cfg, launch, kern in launchers(ns, module, configs):
            res = kern.resources
            row = {"version": version, "schedule": schedule, "config": " ".join(map(str, cfg)),
                   "registers": res.registers, "spill_bytes": res.spill_stores + res.spill_loads}
            try:
                for i, (M, N, K) in enumerate([*ns["CHECK_SHAPES"], TAIL_SHAPE]):
                    ns["check"](launch, M, N, K, seed=31 * i + 5)
            except AssertionError as exc:
                print(f"{version} {schedule} {cfg} FAILS the check: {str(exc).splitlines()[0]}", flush=True)
                continue
            rows.append((row, launch))
    print(f"{len(rows)} launchers passed the checks at {time.perf_counter() - start:.0f} s", flush=True)

    timer = CudaTimer()
    prov = {"nvrtc": nvrtc.nvrtc_version(), **collect()}
    path = results_dir() / "sgemm_schedule.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    out, f, w = [], path.open("w", newline=""), None  # row by row: a run cut short keeps what it measured
    for n in (int(s) for s in args.sizes.split(",")):
        inputs = [ns["make_inputs"](n, n, n)]
        for row, launch in rows:
            cublas = timer.time(ns["torch_mm"], inputs).median_ms
            ours = timer.time(launch, inputs).median_ms
            rec = {**row, "size": n, "ms": round(ours, 4), "tflops": round(2 * n**3 / ours / 1e9, 2),
                   "cublas_ms": round(cublas, 4), "pct_of_cublas": round(100 * cublas / ours, 1)}
            out.append(rec)
            if w is None:
                w = csv.DictWriter(f, fieldnames=[*rec, *prov])
                w.writeheader()
            w.writerow({**rec, **prov})
            f.flush()
            print(f"{n:>5} {rec['version']:<9} {rec['schedule']:<18} {rec['config']:<24} {rec['registers']:>3} regs "
                  f"{rec['tflops']:6.2f} TFLOP/s {rec['pct_of_cublas']:5.1f}% of cuBLAS", flush=True)
        del inputs

    f.close()
    print("wrote", path, f"in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
