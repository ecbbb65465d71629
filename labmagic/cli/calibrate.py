"""``labmagic calibrate``: measure what this GPU really reaches, once, into ``results/<gpu>/ceilings.json``
(see :mod:`labmagic.benchmark.ceilings` for what is measured and how)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import NoGPUError
from ..paths import atomic_write
from ..runtime import device_slug, has_gpu


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--copy-mib", type=int, default=2048, help="size of each buffer (MiB, default 2048)")
    parser.add_argument("--matmul-n", type=int, default=8192, help="matmul size n for n x n x n (default 8192)")
    parser.add_argument("--dtypes", default="fp32,tf32,bf16,fp16,int8,fp8",
                        help="comma-separated matmul dtypes (default all)")
    parser.add_argument("--rep-ms", type=float, default=300.0, help="timed milliseconds per measurement")
    parser.add_argument("--out", help="output path (default results/<gpu>/ceilings.json)")


def run(args) -> int:
    if not has_gpu():
        raise NoGPUError("labmagic calibrate measures a GPU, and this machine has none")
    from ..benchmark import roofline
    from ..benchmark.ceilings import measure_ceilings

    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    data = measure_ceilings(args.copy_mib, args.matmul_n, dtypes, args.rep_ms)
    path = Path(args.out or roofline.ceilings_path(device_slug()))
    atomic_write(path, json.dumps(data, indent=2) + "\n")
    print(f"wrote {path}")
    return 0
