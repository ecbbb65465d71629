"""Search the tile space of chapter 02's ``sgemm_async`` template wider than the chapter's autotune cell can.

The chapter compiles a short list of instances (a cell that compiles a hundred would take minutes); this
script is how that list was chosen. It enumerates every (BM, BN, BK, WM, WN, TM, TN, STAGES) the
template's static_asserts accept and whose registers and shared memory fit, compiles them in parallel
with NVRTC, drops any that spill or fail the odd-shape check, times each against cuBLAS (TF32 off) at
4096^3 and 8192^3 in one interleaved loop, re-times the leaders with more repetitions, and writes
``results/<gpu>/sgemm_configs.csv``.

    python benchmarks/sgemm_configs.py [--budget-s 120]
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import time
from concurrent import futures
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def template_source() -> str:
    """The rung-8 cell of chapter 02, without its magic line: the search times the chapter's own code."""
    from labmagic.child.replay import code_cell

    return code_cell("02_sgemm", "%%cuda_kernel --as async_module").split("\n", 1)[1]


def candidates() -> list[tuple[int, ...]]:
    out = []
    for bm, bn, bk, wm, wn, (tm, tn), stages in itertools.product(
        (64, 128, 256),
        (64, 128, 256),
        (8, 16, 32),
        (32, 64, 128),
        (32, 64, 128),
        ((8, 8), (16, 8), (8, 16), (4, 8), (8, 4)),
        (2, 3, 4, 5),
    ):
        if bm % wm or bn % wn or wm % tm or wn % tn:
            continue
        threads = (bm // wm) * (bn // wn) * 32
        tr, tc = wm // tm, wn // tn
        if tr * tc != 32 or not 128 <= threads <= 512:
            continue
        if (
            threads % bk
            or threads % (bn // 4)
            or bm * bk < threads
            or bk * bn < 4 * threads
            or bm * bk > 32 * threads
        ):
            continue
        if stages * bk * (bm + 4 + bn) * 4 > 227 * 1024:
            continue
        if (
            threads * (tm * tn + 2 * (tm + tn) + 40) > 65536
        ):  # one block's registers must fit an SM
            continue
        if (
            tm * tn < 64 or threads not in (128, 256) or stages > 4
        ):  # measured losers, kept out of the search
            continue
        out.append((bm, bn, bk, wm, wn, tm, tn, stages))
    return out


def expr(cfg) -> str:
    return f"sgemm_async<{', '.join(map(str, cfg))}>"


def _compile(args):
    source, cfg = args
    from labmagic.compiler import nvrtc

    result = nvrtc.compile(source, arch="sm_90", name_expressions=(expr(cfg),))
    res = next(iter(result.resources.values()), None)
    return cfg, (res.registers, res.spill_stores + res.spill_loads) if res else (
        None,
        None,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--budget-s",
        type=float,
        default=120.0,
        help="stop timing new configs after this",
    )
    parser.add_argument("--sizes", default="4096,8192")
    args = parser.parse_args()
    start = time.perf_counter()

    import torch

    from labmagic.compiler import kernel
    from labmagic.paths import results_dir
    from labmagic.store.table_csv import write_table

    torch.backends.cuda.matmul.allow_tf32 = False
    source = template_source()
    cands = candidates()
    print(f"{len(cands)} candidate configs", flush=True)
    with futures.ProcessPoolExecutor(max_workers=os.cpu_count()) as pool:
        compiled = list(pool.map(_compile, [(source, c) for c in cands]))
    usable = [c for c, (regs, spills) in compiled if regs is not None and spills == 0]
    print(
        f"compiled in {time.perf_counter() - start:.0f} s; {len(usable)} without spills",
        flush=True,
    )

    def launcher(cfg):
        bm, bn, bk, wm, wn, _, _, stages = cfg
        k = kernel.compile_module(source, arch="sm_90", name_expressions=(expr(cfg),))[
            expr(cfg)
        ]
        threads, smem = (bm // wm) * (bn // wn) * 32, stages * bk * (bm + 4 + bn) * 4

        def run(A, B, C):
            M, K = A.shape
            N = B.shape[1]
            k(
                A,
                B,
                C,
                M,
                N,
                K,
                grid=((N + bn - 1) // bn, (M + bm - 1) // bm),
                block=threads,
                smem=smem,
            )

        return run

    def correct(run) -> bool:
        for M, N, K in ((31, 17, 29), (127, 255, 63), (1000, 1000, 1000)):
            A, B = torch.randn(M, K, device="cuda"), torch.randn(K, N, device="cuda")
            C = torch.full((M, N), float("nan"), device="cuda")
            run(A, B, C)
            if not torch.allclose(
                C.double(), A.double() @ B.double(), rtol=1e-4, atol=1e-3
            ):
                return False
        return True

    def mm(A, B, C):
        torch.mm(A, B, out=C)

    def time_ms(fn, args, reps):
        fn(*args)
        torch.cuda.synchronize()
        ts = []
        for _ in range(reps):
            s, e = (
                torch.cuda.Event(enable_timing=True),
                torch.cuda.Event(enable_timing=True),
            )
            s.record()
            fn(*args)
            e.record()
            e.synchronize()
            ts.append(s.elapsed_time(e))
        return statistics.median(ts)

    sizes = [int(s) for s in args.sizes.split(",")]
    inputs = {
        n: (
            torch.randn(n, n, device="cuda"),
            torch.randn(n, n, device="cuda"),
            torch.empty(n, n, device="cuda"),
        )
        for n in sizes
    }
    first, rows, runs = sizes[0], [], {}
    for cfg in usable:  # first pass: the smallest size only, few repetitions
        if time.perf_counter() - start > args.budget_s:
            print("budget spent: remaining configs not timed", flush=True)
            break
        try:
            run = launcher(cfg)
        except Exception as exc:  # noqa: BLE001  (a config the driver refuses: report and go on)
            print(cfg, "launch setup failed:", exc)
            continue
        if not correct(run):
            print(cfg, "FAILS the odd-shape check")
            continue
        runs[cfg] = run
        rows.append(
            {
                "config": cfg,
                first: time_ms(mm, inputs[first], 3) / time_ms(run, inputs[first], 3),
            }
        )
    rows.sort(key=lambda r: -r[first])
    rows = rows[:30]
    for r in rows:  # second pass: the leaders at every size
        for n in sizes[1:]:
            r[n] = time_ms(mm, inputs[n], 4) / time_ms(runs[r["config"]], inputs[n], 4)
    rows.sort(key=lambda r: -min(r[n] for n in sizes))
    print("first passes, fraction of cuBLAS:")
    for r in rows:
        print(r["config"], "  ".join(f"{n}: {r[n]:.3f}" for n in sizes))

    # Leaders again, interleaved with cuBLAS, more repetitions.
    final = []
    for r in rows[:12]:
        cfg, out = r["config"], {"config": " ".join(map(str, r["config"]))}
        for n in sizes:
            reps = 30 if n <= 4096 else 12
            c1 = time_ms(mm, inputs[n], reps)
            o = time_ms(runs[cfg], inputs[n], reps)
            c2 = time_ms(mm, inputs[n], reps)
            cub = (c1 + c2) / 2
            out[f"cublas_ms_{n}"], out[f"ours_ms_{n}"], out[f"frac_{n}"] = (
                round(cub, 4),
                round(o, 4),
                round(cub / o, 4),
            )
            out[f"tflops_{n}"] = round(2 * n**3 / o / 1e9, 2)
        final.append(out)
        print(out, flush=True)
    path = write_table(final, results_dir() / "sgemm_configs.csv")
    print("wrote", path, f"in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
