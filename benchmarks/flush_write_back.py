"""What flushing the L2 by writing costs the next kernel, against flushing it by reading (what ``%bench`` does).

``%bench`` evicts the L2 before each timed call by reading a buffer twice the L2's size (``CudaTimer._evict``). The
common alternative, ``buffer.zero_()`` of a buffer larger than the L2, evicts too but leaves the L2 full of dirty
lines, which are written back to HBM when the next kernel's misses evict them: inside its timed interval. This script
measures that charge on one memory-bound kernel of about 40 us on an H200 (``torch.add`` of 2^24 float32: 201 MB):

    for each of PAIRS pairs, alternating which flush goes first:
        sleep, event, flush, event, sleep, event, kernel, event     (once after reading, once after zero_())

Each ``torch.cuda._sleep`` outlasts the host's enqueueing, so an interval holds its kernel, as in ``CudaTimer``; both
flushes use a buffer of the same size (twice the L2). The row (``labmagic.benchmark.write_back.COLUMNS``) holds the
kernel's median after each flush, the median of the paired differences (after ``zero_()`` minus after reading) with
its 95% interval, the flush kernels' own medians, and the run's provenance. The Timing page of the book quotes it.

Usage (on a GPU machine, from the repository root):

    python benchmarks/flush_write_back.py               # writes results/<gpu>/flush_write_back.csv
    python benchmarks/flush_write_back.py --dry-run     # any machine: print the plan; time nothing
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

#: The kernel: ``torch.add`` of 2^LOG2 float32 (12 bytes an element: two reads and a write).
LOG2 = 24
KERNEL = "torch.add float32"
PAIRS = 200
WARMUP_PAIRS = 10
#: The sleep between the flush and the kernel, long enough for the host to enqueue the kernel and its events.
SLEEP_US = 100.0


def measure(log2: int, pairs: int) -> dict:
    """The timed columns (``write_back.summarize``) and the sizes, from ``pairs`` alternating pairs on this GPU."""
    import torch

    from labmagic.benchmark.write_back import summarize
    from labmagic.timing import CudaTimer

    n = 2**log2
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.empty_like(a)
    timer = CudaTimer()
    timer._evict()  # allocates the read flush's buffer: twice the L2
    flush_bytes = timer._flush.numel() * timer._flush.element_size()
    dirty = torch.empty(flush_bytes // 4, dtype=torch.int32, device="cuda")
    flushes = {"read": timer._evict, "zero": dirty.zero_}
    cycles = timer._cycles_for_us(SLEEP_US)
    samples = {name: ([], []) for name in flushes}  # (kernel us, flush us)
    for i in range(WARMUP_PAIRS + pairs):
        order = ("read", "zero") if i % 2 == 0 else ("zero", "read")
        events = {}
        for name in order:
            marks = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
            torch.cuda._sleep(cycles)  # the flush's interval, too, holds the flush and not the host's enqueueing
            marks[0].record()
            flushes[name]()
            marks[1].record()
            torch.cuda._sleep(cycles)
            marks[2].record()
            torch.add(a, b, out=c)
            marks[3].record()
            events[name] = marks
        torch.cuda.synchronize()
        if i >= WARMUP_PAIRS:
            for name, marks in events.items():
                samples[name][0].append(marks[2].elapsed_time(marks[3]) * 1e3)
                samples[name][1].append(marks[0].elapsed_time(marks[1]) * 1e3)
    torch.testing.assert_close(c, a + b)  # the timed kernel computed the add
    row = summarize(samples["read"][0], samples["zero"][0], samples["read"][1], samples["zero"][1])
    return dict(row, kernel=KERNEL, n=n, kernel_bytes=12 * n, l2_bytes=CudaTimer.l2_bytes(), flush_bytes=flush_bytes)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--log2", type=int, default=LOG2, help=f"the add's size, log2 elements (default {LOG2})")
    parser.add_argument("--pairs", type=int, default=PAIRS, help=f"timed pairs (default {PAIRS})")
    parser.add_argument("--out", help="CSV path (default results/<gpu>/flush_write_back.csv)")
    parser.add_argument("--dry-run", action="store_true", help="print the plan; time nothing")
    args = parser.parse_args(argv)
    if args.pairs < 6:
        parser.error("--pairs must be 6 or more (fewer give no 95% interval of the median difference)")

    from labmagic.benchmark import provenance
    from labmagic.benchmark.write_back import COLUMNS, FILE_NAME, format_row
    from labmagic.paths import results_dir
    from labmagic.runtime import has_gpu
    from labmagic.store.table_csv import write_table

    out = Path(args.out) if args.out else results_dir() / FILE_NAME
    n = 2**args.log2
    print(f"plan: {KERNEL} of {n} elements ({12 * n / 1e6:.0f} MB) after an L2 flush by reading (CudaTimer._evict) "
          f"and after zero_() of a buffer of the same size (twice the L2), {args.pairs} pairs alternating, after "
          f"{WARMUP_PAIRS} warm-up pairs -> {out}")
    if args.dry_run or not has_gpu():
        print("dry run: nothing timed" if args.dry_run else "no GPU: nothing timed, nothing written")
        return 0
    prov = provenance.collect()
    row = format_row(dict(measure(args.log2, args.pairs), **{k: prov[k] for k in COLUMNS if k in prov}))
    write_table([row], out)
    print(f"after reading: {row['after_read_us']} us, after zero_(): {row['after_zero_us']} us; the write-back: "
          f"{row['write_back_us']} us (95% interval {row['write_back_low_us']} to {row['write_back_high_us']}, "
          f"{row['pairs']} pairs); the flushes: reading {row['read_flush_us']} us, zero_() {row['zero_flush_us']} us")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
