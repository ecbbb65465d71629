"""Chapter 01's race at 2**28, torch, Triton and Pallas only, through ``labmagic.bench`` (Pallas on the device clock,
``timer=cupti``); prints one line per variant and saves nothing.

    python benchmarks/pallas_vs_triton.py      # on a GPU machine
"""
import sys

import labmagic  # noqa: F401
from labmagic.benchmark import bench
from labmagic.child.replay import find_race, load_chapter

ns = load_chapter("01", parameters={"size": "full"})
race = find_race(ns)
result = bench(race, shapes=[2**28], variants=["triton", "pallas"], save=False, plot=False, check=True)
for row in result.rows:
    print(f"{row.variant:10s} {row.status:6s} timer={row.timer:22s} median={row.ms_median} ms  "
          f"gbps={row.gbps}  vs_ref={row.vs_ref}  note={row.error}")
sys.stdout.flush()
