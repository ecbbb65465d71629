"""Chapter 07's decode at batch 1 under Nsight Compute: ``cuda_decode`` against SDPA's cuDNN and flash backends.

At one sequence of 32k tokens (16 heads of 128, bf16) the chapter's ``%bench`` run at 0cc87c0 had ``cuda_decode`` at
3,222 GB/s against cuDNN's 3,843 and the flash backend's 3,305, and this script found why: a merge kernel of 31.5 us
(one block a head walking 128 splits) where cuDNN's took 4.1. This script profiles one call of each variant at that
shape: every kernel the call launches, with Nsight Compute's defaults (caches flushed before each kernel, clocks
locked to base), and writes per-kernel duration, grid, occupancy and DRAM traffic to
``results/<gpu>/decode_profile.csv``.

``cuda_decode`` is the chapter's own: its decode cell compiled as committed and its launcher cell executed
(``labmagic.child.replay.code_cell``), so the split rule and the kernel are the chapter's. The SDPA backends are
called through the same aten operators as the chapter's references. Each variant is profiled in its own process
(``ncu ... decode_profile.py --run VARIANT``), warmed up first and captured between ``cudaProfilerStart`` and
``cudaProfilerStop``.

    python benchmarks/decode_profile.py
"""

from __future__ import annotations

import csv
import io
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

B, H, SK, D = 1, 16, 32768, 128
VARIANTS = ("cuda_decode", "sdpa_cudnn", "sdpa_flash")
METRICS = {  # ncu metric -> CSV column
    "gpu__time_duration.sum": "duration",
    "launch__grid_size": "grid",
    "launch__block_size": "block",
    "launch__registers_per_thread": "registers",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "dram__bytes_read.sum": "dram_read",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_throughput_pct",
    "lts__t_sector_hit_rate.pct": "l2_hit_pct",
}
UNITS = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6,  # -> microseconds
         "ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6,
         "byte": 1e-6, "Kbyte": 1e-3, "Mbyte": 1.0, "Gbyte": 1e3,      # -> megabytes
         "B": 1e-6, "KB": 1e-3, "MB": 1.0, "GB": 1e3}


def variant(name):
    """One of the chapter's decode variants, returning (O, lse)."""
    import torch

    aten = torch.ops.aten
    if name == "sdpa_cudnn":
        return lambda q, k, v: aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, False, False)[:2]
    if name == "sdpa_flash":
        return lambda q, k, v: aten._scaled_dot_product_flash_attention(q, k, v, 0.0, False, False)[:2]
    import torch.nn.functional as F
    import triton
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import labmagic
    from labmagic.child.replay import code_cell
    from labmagic.compiler.kernel import compile_module
    from labmagic.occupancy import occupancy
    from labmagic.tensor_map import tensor_map_2d

    cell = code_cell("07_attention", "%%cuda_kernel --as decode_module")
    magic, source = cell.split("\n", 1)
    words = shlex.split(magic)  # the magic's own quoting: -n 'flash_decode<__nv_bfloat16, 128, 4, 8>'
    names = [words[i + 1] for i, word in enumerate(words[:-1]) if word in ("-n", "--name-expr")]
    chapter = {  # what the launcher cell needs from the chapter's first cells
        "torch": torch, "F": F, "SDPBackend": SDPBackend, "sdpa_kernel": sdpa_kernel, "triton": triton,
        "labmagic": labmagic, "tensor_map_2d": tensor_map_2d, "occupancy": occupancy, "GPU": True,
        "SMS": torch.cuda.get_device_properties(0).multi_processor_count,
        "decode_module": compile_module(source, name_expressions=names, first_line=2),
    }
    exec(code_cell("07_attention", "def cuda_decode("), chapter)
    return chapter["cuda_decode"]


def run(name: str) -> None:
    """The process Nsight Compute watches: warm-up calls, then one profiled call."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(B, H, s, D, device="cuda", generator=g).to(torch.bfloat16) for s in (1, SK, SK))
    fn = variant(name)
    for _ in range(3):  # compile, plan and load everything before the profiled call
        fn(q, k, v)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    fn(q, k, v)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def profile(name: str) -> list[dict]:
    cmd = ["ncu", "--profile-from-start", "off", "--csv", "--page", "raw", "--metrics", ",".join(METRICS),
           sys.executable, __file__, "--run", name]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"ncu failed on {name} (status {done.returncode}):\n{done.stderr[-2000:]}{done.stdout[-2000:]}")
    out = done.stdout
    lines = [line for line in out.splitlines() if line.startswith('"')]  # ncu's own ==PROF== lines aside
    table = list(csv.reader(io.StringIO("\n".join(lines))))
    header, units, data = table[0], table[1], table[2:]
    rows = []
    for record in data:
        row = {"variant": name, "kernel": record[header.index("Kernel Name")][:120]}
        for metric, column in METRICS.items():
            i = header.index(metric)
            value = float(record[i].replace(",", ""))
            unit = units[i]
            if column in ("duration", "dram_read") and unit not in UNITS:
                sys.exit(f"ncu reported {metric} in {unit!r}, a unit this script does not convert")
            if column == "duration":
                row["duration_us"] = round(value * UNITS[unit], 2)
            elif column == "dram_read":
                row["dram_read_mb"] = round(value * UNITS[unit], 2)
            else:
                row[column] = int(value) if value.is_integer() else round(value, 1)
        rows.append(row)
    return rows


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--run":
        run(sys.argv[2])
        return
    from labmagic.paths import results_dir
    from labmagic.store.table_csv import write_table

    rows = [row for name in VARIANTS for row in profile(name)]
    kv_mb = 2 * B * H * SK * D * 2 / 1e6
    for name in VARIANTS:
        mine = [r for r in rows if r["variant"] == name]
        total = sum(r["duration_us"] for r in mine)
        print(f"{name}: {len(mine)} kernel(s), {total:.1f} us in all, {kv_mb / total * 1e3:.0f} GB/s of KV cache "
              f"({kv_mb:.0f} MB) at Nsight Compute's clocks")
        for r in mine:
            print(f"    {r['kernel'][:70]:<70} {r['duration_us']:>8} us  grid {r['grid']:>6} x {r['block']:<4} "
                  f"occupancy {r['achieved_occupancy_pct']}%  DRAM {r['dram_read_mb']} MB read, "
                  f"{r['dram_throughput_pct']}% of peak  L2 hit {r['l2_hit_pct']}%")
    print(f"wrote {write_table(rows, results_dir() / 'decode_profile.csv')}")


if __name__ == "__main__":
    main()
