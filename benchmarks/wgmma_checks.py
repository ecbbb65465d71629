"""Two claims of chapter 06 that its %bench run does not measure, checked with the chapter's own code.

- **The peer arrive.** Rung 5 (``wgmma_ws<256, 4, 16, 2>``, rung 4's kernel in clusters of two) arrives on its
  peer block's ``empty`` barrier with the default semantics (release at CTA scope: ``mbar_arrive_cluster`` of
  ``book/include/lab/hopper.cuh``). The chapter says a ``.release.cluster`` arrive compiles to a GPU-wide fence
  (``MEMBAR``) in the consumers' loop and costs throughput. This script compiles the chapter's rung 5 as it is and
  with that one qualifier changed (an edited copy of the header first on the include path), counts ``MEMBAR`` in
  each kernel's SASS (no GPU needed), and on a GPU checks both on an odd shape and times them at 4096^3 and 8192^3
  next to rung 4 and cuBLAS.
- **The tensor-map cache.** At 512^3 ``%bench`` rotates ~120 input sets (two maps each); with the cache as
  committed every map stays cached, so the TMA rungs time as kernels, not as map encodes. Timed here with
  ``%bench``'s timer over as many input sets as ``%bench`` would use.

It replays ``book/06_tensor_core_gemm.ipynb`` up to its ``%bench`` cell (``labmagic.child.replay.load_chapter``,
size "quick") and uses the chapter's launchers, inputs and check. Writes ``results/<gpu>/wgmma_checks.csv``.

    python benchmarks/wgmma_checks.py
"""

from __future__ import annotations

import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_ARRIVE = "mbarrier.arrive.shared::cluster.b64"
CLUSTER_ARRIVE = "mbarrier.arrive.release.cluster.shared::cluster.b64"
CLUSTER_KERNEL = "wgmma_ws<256, 4, 16, 2>"  # rung 5
CLUSTER_LAUNCHED = "wgmma_ws_256_4_16_2"  # the name the chapter binds it to, which cuda_wgmma_cluster launches


def hopper_variants():
    """Rung 5 compiled as it is and with the peer arrive at cluster scope (lab/hopper.cuh edited in a copy that comes
    first on the include path, so every header that includes it reads the edit)."""
    from labmagic.analysis.sass import disassemble
    from labmagic.child.replay import code_cell
    from labmagic.compiler.kernel import compile_module
    from labmagic.paths import book_include_dir

    source = code_cell("06_tensor_core_gemm", CLUSTER_KERNEL).split("\n", 1)[1]  # without the %%cuda_kernel line
    header = (book_include_dir() / "lab" / "hopper.cuh").read_text(encoding="utf-8")
    assert header.count(DEFAULT_ARRIVE) == 1, "lab/hopper.cuh's peer arrive is not where this script expects it"
    out = {}
    with tempfile.TemporaryDirectory(prefix="wgmma-checks-") as edited:
        (Path(edited) / "lab").mkdir()
        edited_header = header.replace(DEFAULT_ARRIVE, CLUSTER_ARRIVE)
        (Path(edited) / "lab" / "hopper.cuh").write_text(edited_header, encoding="utf-8")
        for name, options in (("default", []), ("release.cluster", ["-I", edited])):
            module = compile_module(source, arch="sm_90a", options=options, name_expressions=[CLUSTER_KERNEL])
            kernel = module.kernels[CLUSTER_KERNEL]
            sass = disassemble(module.result.cubin)[kernel.symbol]
            membars = [i.opcode for i in sass if i.base == "MEMBAR"]
            out[name] = (kernel, membars)
    return out


def main() -> None:

    import labmagic
    from labmagic.benchmark.runner import gpu_input_sets
    from labmagic.child.replay import load_chapter
    from labmagic.paths import results_dir
    from labmagic.store.table_csv import write_table
    from labmagic.timing import CudaTimer

    variants = hopper_variants()
    for name, (_, membars) in variants.items():
        counts = ", ".join(f"{n} {op}" for op, n in sorted(Counter(membars).items()))
        print(f"{CLUSTER_KERNEL}, peer arrive {name}: {len(membars)} MEMBAR in SASS ({counts})")
    if not labmagic.has_gpu():
        print("no GPU: the timings need one")
        return
    ns = load_chapter("06_tensor_core_gemm", parameters={"size": "quick"})
    timer = CudaTimer()
    rows = []

    def timed(label, fn, shape, sets):
        inputs = [ns["make_inputs"](*shape) for _ in range(sets)]
        t = timer.time(fn, inputs, set_bytes=2 * (shape[0] * shape[2] + shape[1] * shape[2] + shape[0] * shape[1]))
        tflops = 2 * shape[0] * shape[1] * shape[2] / t.median_ms / 1e9
        rows.append({"check": label, "shape": "x".join(map(str, shape)), "input_sets": sets, "median_us":
                     f"{t.median_ms * 1e3:.2f}", "tflops": f"{tflops:.1f}", "timer": t.method})
        print(f"{label:<44} {rows[-1]['shape']:<15} sets {sets:<4} {rows[-1]['median_us']:>9} us "
              f"{rows[-1]['tflops']:>7} TFLOP/s  ({t.method})", flush=True)

    original = ns[CLUSTER_LAUNCHED]
    for name, (kernel, _) in variants.items():
        ns[CLUSTER_LAUNCHED] = kernel  # the chapter's launcher looks the kernel up in its namespace per call
        for i, shape in enumerate([(257, 385, 4104), (1000, 1000, 1000)]):
            ns["check"](ns["cuda_wgmma_cluster"], *shape, seed=11 + i)  # raises on a mismatch
        print(f"peer arrive {name}: checks pass", flush=True)
    for n in (4096, 8192):
        shape = (n, n, n)
        timed("torch (cuBLAS)", ns["torch_cublas"], shape, 1)
        timed("cuda_wgmma_ws", ns["cuda_wgmma_ws"], shape, 1)
        for name, (kernel, membars) in variants.items():
            ns[CLUSTER_LAUNCHED] = kernel
            timed(f"cuda_wgmma_cluster, peer arrive {name} ({len(membars)} MEMBAR)", ns["cuda_wgmma_cluster"], shape, 1)
    ns[CLUSTER_LAUNCHED] = original
    shape = (512, 512, 512)
    sets = gpu_input_sets(2 * 3 * 512 * 512, timer)
    for name in ("cuda_wgmma_tma", "cuda_wgmma_ws", "torch_cublas"):
        timed(f"{name}, %bench's input-set rotation", ns[name], shape, sets)
    print(f"wrote {write_table(rows, results_dir() / 'wgmma_checks.csv')}")


if __name__ == "__main__":
    main()
