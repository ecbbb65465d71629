"""Host cost of the pieces a chapter's launcher calls around its kernel launch, one by one (issue #49).

An eager call of chapter 10's FP8 GEMM launcher took 60 us of host time on the H200 against ``torch._scaled_mm``'s 23
(a cProfile of 3000 calls at 16 x 28672 x 4096, in that chapter's "What we measured"). The launch itself is
``benchmarks/launch_overhead.py``'s business (about 6.5 us); the rest is what a launcher does before it: its
operands' checks (``labmagic.require_tensor``, four a call), its TMA descriptors (``labmagic.tensor_map.tensor_map_2d``,
two cached maps a call), its grid's arithmetic (``triton.cdiv``, a ``@constexpr_function`` that goes through Triton's
dispatch when called from Python, against ``labmagic.cdiv``) and the GPU's capability (``torch.cuda.
get_device_capability``, which a launcher may read once instead). Each is timed alone, from outside (no profiler
inflating small functions): the median of ``--repeats`` runs of ``--calls`` calls, in microseconds a call.

Run it at two commits on one machine to compare versions of labmagic; the rows carry the commit. Without a GPU the
tensors live on the CPU and the tensor-map rows are left out (a map needs the driver).

Outputs: ``launcher_parts.csv`` in ``--out`` (default ``results/<gpu>/``), and the table on stdout.

    python benchmarks/launcher_parts.py                # any machine, about 10 s
"""

from __future__ import annotations

import argparse
import statistics
import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

import labmagic  # noqa: E402  (before triton: on a machine without a GPU it selects Triton's interpreter)


def parts(device: str) -> list[tuple[str, object]]:
    """(what, a no-argument callable doing it once) for every part this machine can run, in the table's order."""
    import torch
    import triton

    from labmagic.tensor_map import tensor_map_2d

    qa = torch.empty(16, 4096, dtype=torch.uint8, device=device)  # a decode batch's FP8 codes, viewed as bytes
    qw = torch.empty(28672, 4096, dtype=torch.uint8, device=device)  # Llama-3-8B's gate/up weight
    sa = torch.empty(16, device=device)
    rows = [
        ("require_tensor, 2-D uint8 (dim, device)",
         lambda: labmagic.require_tensor(qa, "qa", (torch.uint8,), dim=2, device=device)),
        ("require_tensor, 1-D fp32 (align 4)",
         lambda: labmagic.require_tensor(sa, "sa", (torch.float32,), align=4, device=device)),
        ("triton.cdiv", lambda: triton.cdiv(28672, 128)),
        ("labmagic.cdiv", lambda: labmagic.cdiv(28672, 128)),
        ("triton.next_power_of_2", lambda: triton.next_power_of_2(512)),
        ("labmagic.next_power_of_2", lambda: labmagic.next_power_of_2(512)),
    ]
    if device == "cuda":
        tensor_map_2d(qa, (64, 128))
        tensor_map_2d(qw, (128, 128))
        rows += [
            ("tensor_map_2d, a cached map", lambda: tensor_map_2d(qw, (128, 128))),
            ("torch.cuda.get_device_capability", lambda: torch.cuda.get_device_capability(device)),
            ("torch.empty (16 x 28672 bf16)", lambda: torch.empty(16, 28672, dtype=torch.bfloat16, device=device)),
        ]
    return rows


def measure(rows: list[tuple[str, object]], calls: int, repeats: int) -> list[dict]:
    """Each part's microseconds a call: median and minimum over ``repeats`` runs of ``calls`` calls."""
    out = []
    for what, call in rows:
        call()  # warm: first-call caches (lru_cache, the map cache) are not what is timed
        runs = [t / calls * 1e6 for t in timeit.repeat(call, number=calls, repeat=repeats)]
        out.append({"what": what, "us_per_call_median": f"{statistics.median(runs):.3f}",
                    "us_per_call_min": f"{min(runs):.3f}", "calls": calls * repeats})
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="folder for launcher_parts.csv (default results/<gpu>/)")
    parser.add_argument("--calls", type=int, default=20000, help="calls a run (default 20000)")
    parser.add_argument("--repeats", type=int, default=5, help="runs a part (default 5)")
    args = parser.parse_args(argv)
    from labmagic.benchmark import provenance
    from labmagic.paths import results_dir
    from labmagic.store.table_csv import write_table

    device = labmagic.torch_device()
    rows = measure(parts(device), args.calls, args.repeats)
    prov = provenance.collect()
    out = Path(args.out) if args.out else results_dir()
    write_table([{**r, **prov} for r in rows], out / "launcher_parts.csv")
    print(f"{prov['gpu']} at {prov['git_commit']}: host microseconds a call, median of {args.repeats} runs of "
          f"{args.calls}")
    for r in rows:
        print(f"  {r['what']:<42} {float(r['us_per_call_median']):8.3f}")
    print(f"-> {out / 'launcher_parts.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
