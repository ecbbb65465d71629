"""Cold compile and cache-hit times of a chapter's ``%%cuda_kernel`` cells, through a real IPython shell.

Re-running an unchanged cell must cost under 10 ms. This runs each of the chapter's CUDA cells once
with an empty on-disk cache (cold: NVRTC + ptxas), then again several times (memory cache hit: hash,
lookup, bind, display), and writes ``results/<gpu>/compile_cache.csv``.

    python benchmarks/compile_cache.py [book/01_vector_add.ipynb] [--repeats 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def cuda_cells(notebook: Path) -> list[str]:
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    return [c.source for c in nb.cells if c.cell_type == "code" and c.source.lstrip().startswith("%%cuda_kernel")]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", nargs="?", default="book/01_vector_add.ipynb")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    os.environ["LABMAGIC_CACHE_DIR"] = tempfile.mkdtemp(prefix="labmagic-cold-")  # nothing cached on disk

    from IPython.testing.globalipapp import start_ipython

    from labmagic import runtime
    from labmagic.compiler import nvrtc
    from labmagic.paths import results_dir
    from labmagic.store.table_csv import write_table

    ip = start_ipython()
    ip.run_line_magic("load_ext", "labmagic")
    rows = []
    for source in cuda_cells(Path(args.notebook)):
        name = next(line.split("void", 1)[1].split("(")[0].strip()
                    for line in source.splitlines() if "__global__" in line)
        start = time.perf_counter()
        ip.run_cell(source, store_history=False)
        cold_ms = (time.perf_counter() - start) * 1e3
        hits = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            ip.run_cell(source, store_history=False)
            hits.append((time.perf_counter() - start) * 1e3)
        rows.append({
            "kernel": name, "arch": runtime.target_arch(), "nvrtc": nvrtc.nvrtc_version(),
            "cold_compile_ms": f"{cold_ms:.1f}", "cache_hit_ms_median": f"{statistics.median(hits):.2f}",
            "cache_hit_ms_max": f"{max(hits):.2f}", "repeats": args.repeats,
        })
    out = write_table(rows, results_dir() / "compile_cache.csv")
    sys.stdout.write(f"\n{'kernel':<22}{'cold ms':>10}{'hit ms (median)':>18}{'hit ms (max)':>15}\n")
    for r in rows:
        sys.stdout.write(f"{r['kernel']:<22}{r['cold_compile_ms']:>10}{r['cache_hit_ms_median']:>18}{r['cache_hit_ms_max']:>15}\n")
    sys.stdout.write(f"written {out}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
