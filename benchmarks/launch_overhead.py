"""Host cost of a kernel launch, and of re-running an unchanged ``%%cuda_kernel`` cell (issue #14, items 1 and 6).

Item 1: back-to-back launches of a one-thread kernel, timed on the host (the launches queue asynchronously; the
GPU finishes each in about as long as it takes to issue the next, so the queue never fills). Per call, for

- the labmagic callable (``compile_cuda(TOUCH).touch(x, y, n, grid=(1,), block=(1,))``, every argument checked),
  with the same tensors each call and with a fresh view of them each call (a cache keyed on the objects must not
  be what makes it fast), and its argument check alone (``check_args``, no launch);
- CuPy's ``RawKernel`` on the same source, with CuPy arrays (the reference every ratio is taken to) and with raw
  pointers (the floor of a CuPy launch);
- ``torch.Tensor.add_`` on a one-element tensor, and a trivial Triton kernel.

Each is warmed up, then timed as ``--batches`` batches of ``--calls`` calls (``time.perf_counter_ns`` around the
batch, a synchronize only between batches); the median and the minimum of the per-call microseconds are reported.
Each call goes through one Python ``lambda`` (about 0.1 us, the same for every backend). A cProfile of
``--profile-calls`` labmagic launches, and the parts of a launch timed one by one from outside (no profiler
inflating small functions), say where the labmagic callable's time goes.

Item 6: in a real IPython shell (all display formats active, as in Jupyter, so the HTML panel is rendered too),
``%load_ext labmagic``, compile two kernel cells, then run the second cell as ``%%cuda_kernel``, ``--panel`` and
``--panel --vs <first>``: the first run of each variant is reported apart, then ``--repeats`` re-runs of the
unchanged cell (all compile-cache hits) are timed, and one cached ``--panel --vs`` run is profiled.

Outputs in ``--out`` (default ``results/<gpu>/``): ``launch_overhead.csv``, ``launch_overhead_profile.txt``,
``cached_cell.csv``, ``cached_cell_profile.txt``. A run stops itself after ``--time-limit`` seconds (a stack dump
of every thread says where it was).

Usage (from the repository root):

    python benchmarks/launch_overhead.py                 # GPU: all four files, about 30 s
    python benchmarks/launch_overhead.py --dry-run       # any machine: compile, time the cached cell, print the plan
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import csv
import faulthandler
import io
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

import labmagic  # noqa: E402  (before triton: on a machine without a GPU it selects Triton's interpreter)
from labmagic.paths import atomic_write  # noqa: E402

TOUCH = r"""
extern "C" __global__ void touch(float* x, const float* y, int n) {
    // One thread, one load, one store: the kernel costs almost nothing, so what is timed is the launch.
    if (threadIdx.x == 0 && n > 0) x[0] = y[0] + 1.0f;
}
"""

#: The cells of item 6: chapter 01's first two rungs, renamed so they do not replace a notebook's own kernels.
FIRST_CELL = r"""
extern "C" __global__ void overhead_add(const float* __restrict__ a, const float* __restrict__ b,
                                        float* __restrict__ c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""
SECOND_CELL = r"""
extern "C" __global__ void overhead_add4(const float* __restrict__ a, const float* __restrict__ b,
                                         float* __restrict__ c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int n4 = n / 4;
    if (i < n4) {
        float4 x = reinterpret_cast<const float4*>(a)[i];
        float4 y = reinterpret_cast<const float4*>(b)[i];
        reinterpret_cast<float4*>(c)[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
    int tail = 4 * n4 + i;
    if (i < n - 4 * n4) c[tail] = a[tail] + b[tail];
}
"""
#: Variant -> the magic's line for the second cell.
CELL_VARIANTS = {"plain": "", "panel": "--panel", "panel_vs": "--panel --vs overhead_add"}

#: (what, backend) of each launch row, in the order they are measured; the first labmagic row is item 1's figure.
LAUNCH_ROWS = [
    ("launch_same_args", "labmagic"),
    ("launch_fresh_views", "labmagic"),
    ("check_args_only", "labmagic"),
    ("launch_arrays", "cupy"),
    ("launch_fresh_views", "cupy"),
    ("launch_raw_pointers", "cupy"),
    ("add_", "torch"),
    ("launch", "triton"),
]
REFERENCE = ("launch_arrays", "cupy")

LAUNCH_FIELDS = ["what", "backend", "us_per_call_median", "us_per_call_min", "ratio_to_cupy", "calls"]
CELL_FIELDS = ["variant", "ms_median", "ms_min", "first_ms", "repeats"]

#: Seconds each measurement may take before it stops early (it keeps the batches it has).
STEP_BUDGET_S = {"launch": 6.0, "profile": 15.0, "cell": 15.0}


# -- timing -------------------------------------------------------------------------------------------------------

def time_batches(call, calls: int, batches: int, budget_s: float, sync) -> list[float]:
    """Microseconds per call of each batch of ``calls`` back-to-back ``call(i)``; synchronized between batches only.
    Stops after ``budget_s`` seconds (with at least one batch)."""
    per_call = []
    deadline = time.perf_counter() + budget_s
    for _ in range(batches):
        sync()
        start = time.perf_counter_ns()
        for i in range(calls):
            call(i)
        elapsed = time.perf_counter_ns() - start
        sync()
        per_call.append(elapsed / calls / 1e3)
        if time.perf_counter() > deadline:
            break
    return per_call


#: ``triton.language``, imported by :func:`_triton_touch`; a module global because Triton resolves the names in a
#: kernel's body from its module (older Triton versions do not read closures).
tl = None


def _touch_triton(x_ptr, y_ptr, n):
    if n > 0:
        tl.store(x_ptr, tl.load(y_ptr) + 1.0)


def _triton_touch():
    """The Triton twin of TOUCH (built on first use: importing Triton takes a second, and the dry run needs none)."""
    global tl
    import triton
    import triton.language

    tl = triton.language
    return triton.jit(_touch_triton)


class Launches:
    """The tensors, kernels and call-makers of item 1, built once."""

    def __init__(self, calls: int):
        import cupy
        import numpy as np
        import torch

        self.torch, self.cupy, self.np = torch, cupy, np
        self.calls = calls
        self.n = 1
        self.x = torch.zeros(1, device="cuda")
        self.y = torch.full((1,), 41.0, device="cuda")
        self.module = labmagic.compile_cuda(TOUCH)
        self.touch = self.module.touch  # bound once, as the magic binds it in the notebook
        try:
            self.cupy_kernel, self.cupy_kind = cupy.RawKernel(TOUCH, "touch"), "RawKernel"
        except Exception as exc:  # noqa: BLE001  (CuPy's own NVRTC missing: load labmagic's CUBIN into CuPy instead)
            print(f"cupy.RawKernel failed ({exc}); using RawModule on labmagic's CUBIN", file=sys.stderr)
            self._cubin_dir = tempfile.TemporaryDirectory(prefix="labmagic-touch-")  # RawModule reads a file, lazily
            path = Path(self._cubin_dir.name) / "touch.cubin"
            path.write_bytes(self.module.result.cubin)
            self.cupy_kernel = cupy.RawModule(path=str(path)).get_function("touch")
            self.cupy_kind = "RawModule"
        self.xc, self.yc = cupy.asarray(self.x), cupy.asarray(self.y)  # zero-copy views of the torch tensors
        self.n32 = np.int32(self.n)
        self.pointers = (np.uint64(self.x.data_ptr()), np.uint64(self.y.data_ptr()), self.n32)
        # A fresh view per call, made before the timing: every call sees objects it has never seen.
        self.views = [(self.x.view(1), self.y.view(1)) for _ in range(calls)]
        self.cupy_views = [(self.xc.view(), self.yc.view()) for _ in range(calls)]  # the same for CuPy's launch

    def sync(self) -> None:
        self.torch.cuda.synchronize()

    def check(self) -> None:
        """Each kernel really runs: x = y + 1 after a launch (41 + 1)."""
        for name, launch in (("labmagic", self.call("launch_same_args", "labmagic")),
                             ("cupy", self.call("launch_arrays", "cupy"))):
            self.x.zero_()
            launch(0)
            self.sync()
            if self.x.item() != 42.0:
                raise RuntimeError(f"{name}'s touch wrote {self.x.item()}, expected 42.0")

    def call(self, what: str, backend: str):
        """A one-argument callable (the call's index) that makes one call of the row ``(what, backend)``."""
        touch, x, y, n = self.touch, self.x, self.y, self.n
        grid, block = (1,), (1,)
        if backend == "labmagic":
            if what == "launch_same_args":
                return lambda i: touch(x, y, n, grid=grid, block=block)
            if what == "launch_fresh_views":
                views = self.views
                return lambda i: touch(views[i][0], views[i][1], n, grid=grid, block=block)
            if what == "check_args_only":
                args = (x, y, n)
                return lambda i: touch.check_args(args)
        if backend == "cupy":
            kernel, g3, b3 = self.cupy_kernel, (1, 1, 1), (1, 1, 1)
            if what == "launch_arrays":
                xc, yc, n32 = self.xc, self.yc, self.n32
                return lambda i: kernel(g3, b3, (xc, yc, n32))
            if what == "launch_fresh_views":
                views, n32 = self.cupy_views, self.n32
                return lambda i: kernel(g3, b3, (views[i][0], views[i][1], n32))
            if what == "launch_raw_pointers":
                pointers = self.pointers
                return lambda i: kernel(g3, b3, pointers)
        if backend == "torch":
            return lambda i: x.add_(1.0)
        if backend == "triton":
            kernel = _triton_touch()
            return lambda i: kernel[grid](x, y, n)
        raise ValueError(f"no row ({what}, {backend})")


def measure_launches(launches: Launches, batches: int, warmup: int) -> tuple[list[dict], list[str]]:
    """One row per LAUNCH_ROWS entry that ran; the errors of those that did not.

    The rows take turns: batch 1 of every row, then batch 2 of every row, and so on, so that a drift of the host
    (clock, other processes) over the run lands on every row alike instead of on whichever was measured last."""
    calls, errors = {}, []
    for what, backend in LAUNCH_ROWS:
        try:
            call = launches.call(what, backend)
            for i in range(warmup):
                call(i % launches.calls)
            launches.sync()
        except Exception as exc:  # noqa: BLE001  (one backend failing must not hide the others' numbers)
            errors.append(f"{what}/{backend}: {type(exc).__name__}: {exc}")
            continue
        calls[what, backend] = call
    per_call = {key: [] for key in calls}
    budget = STEP_BUDGET_S["launch"] * max(len(calls), 1)
    deadline = time.perf_counter() + budget
    for _ in range(batches):
        for key, call in list(calls.items()):
            try:
                per_call[key] += time_batches(call, launches.calls, 1, budget, launches.sync)
            except Exception as exc:  # noqa: BLE001
                errors.append(f"{key[0]}/{key[1]}: {type(exc).__name__}: {exc}")
                del calls[key], per_call[key]
        if time.perf_counter() > deadline:
            break
    rows = [{"what": what, "backend": backend, "median": statistics.median(times), "min": min(times),
             "calls": launches.calls * len(times)} for (what, backend), times in per_call.items()]
    reference = next((r["median"] for r in rows if (r["what"], r["backend"]) == REFERENCE), None)
    for r in rows:
        r["ratio"] = r["median"] / reference if reference else float("nan")
    return rows, errors


# -- where the labmagic launch's time goes ------------------------------------------------------------------------

def _short(filename: str) -> str:
    for marker in ("site-packages/", "dist-packages/", "labmagic/", "benchmarks/"):
        if marker in filename:
            return ("" if "-packages" in marker else marker) + filename.rsplit(marker, 1)[1]
    return filename


def profile_table(stats: pstats.Stats, per: int, top: int, key: str, unit: str = "us", only: str = "") -> str:
    """The ``top`` functions by ``key`` (``tottime`` or ``cumtime``), in ``unit`` (us or ms) and calls per ``per``
    runs of what was profiled; only those whose file name holds ``only``, when given."""
    scale = {"us": 1e6, "ms": 1e3}[unit]
    entries = []
    for (filename, line, name), (_, ncalls, tottime, cumtime, _) in stats.stats.items():
        if only not in filename:
            continue
        entries.append((tottime if key == "tottime" else cumtime, tottime, cumtime, ncalls,
                        f"{_short(filename)}:{line}({name})"))
    entries.sort(reverse=True)
    lines = [f"{'tottime ' + unit:>11} {'cumtime ' + unit:>11} {'calls':>8}  function"]
    for _, tottime, cumtime, ncalls, where in entries[:top]:
        lines.append(f"{tottime / per * scale:11.3f} {cumtime / per * scale:11.3f} {ncalls / per:8.2f}  {where}")
    return "\n".join(lines)


class _StreamHandle:
    def __init__(self, handle: int):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


def _cupy_view_of_torch_stream(cupy, torch):
    """CuPy's stream object for torch's current stream, made the way a labmagic launch makes it."""
    handle = torch.cuda.current_stream().cuda_stream
    if hasattr(cupy.cuda.Stream, "from_external"):  # CuPy >= 14
        return cupy.cuda.Stream.from_external(_StreamHandle(handle))
    return cupy.cuda.ExternalStream(handle)


def launch_parts(launches: Launches, batches: int) -> list[str]:
    """Lines: median us per call of pieces of a labmagic launch, each timed alone from outside labmagic."""
    from labmagic.compiler import faults

    torch, cupy, np = launches.torch, launches.cupy, launches.np
    touch, x, y, n = launches.touch, launches.x, launches.y, launches.n
    function = touch.module.function(touch.symbol)
    values = launches.pointers
    try:
        stream = _cupy_view_of_torch_stream(cupy, torch)
    except Exception as exc:  # noqa: BLE001  (reported on its line below)
        stream = exc

    def in_stream(i):
        if isinstance(stream, Exception):
            raise stream
        with stream:
            pass

    parts = [
        ("whole call: touch(x, y, n, grid=(1,), block=(1,))", lambda i: touch(x, y, n, grid=(1,), block=(1,))),
        ("touch.check_args((x, y, n))", lambda i: touch.check_args((x, y, n))),
        ("torch.cuda.current_stream().cuda_stream", lambda i: torch.cuda.current_stream().cuda_stream),
        ("with (CuPy's view of torch's stream): pass", in_stream),
        ("CuPy Function call, marshalled values", lambda i: function((1, 1, 1), (1, 1, 1), values, shared_mem=0)),
        ("faults.record(...)", lambda i: faults.record("touch", (1, 1, 1), (1, 1, 1), 0)),
        ("touch.module.function(symbol)", lambda i: touch.module.function(touch.symbol)),
        ("labmagic.has_gpu()", lambda i: labmagic.has_gpu()),
        ("np.iinfo(np.int32)", lambda i: np.iinfo(np.int32)),
        ("x.device.type", lambda i: x.device.type),
        ("str(x.dtype)", lambda i: str(x.dtype)),
    ]
    out = []
    for label, call in parts:
        try:
            for i in range(200):
                call(i)
            per_call = time_batches(call, launches.calls, batches, STEP_BUDGET_S["launch"], launches.sync)
            out.append(f"{statistics.median(per_call):9.3f}  {label}")
        except Exception as exc:  # noqa: BLE001  (a part that cannot be timed alone: say so, time the others)
            out.append(f"{'failed':>9s}  {label}: {type(exc).__name__}: {exc}")
    return out


def profile_launches(launches: Launches, total_calls: int, batches: int) -> str:
    """Text: the parts of a launch timed alone, then cProfile over ``total_calls`` labmagic launches."""
    call = launches.call("launch_same_args", "labmagic")
    profiler = cProfile.Profile()
    done, deadline = 0, time.perf_counter() + STEP_BUDGET_S["profile"]
    while done < total_calls and time.perf_counter() < deadline:
        launches.sync()
        profiler.enable()
        for i in range(launches.calls):
            call(i)
        profiler.disable()
        done += launches.calls
    launches.sync()
    stats = pstats.Stats(profiler)
    parts = launch_parts(launches, batches)
    text = [
        f"labmagic launch of touch<<<1, 1>>> with torch tensors on {labmagic.device_slug()}; torch "
        f"{launches.torch.__version__}, cupy {launches.cupy.__version__} (reference: cupy.{launches.cupy_kind})",
        "",
        "Parts of one launch, each timed alone (median us per call, no profiler):",
        *parts,
        "",
        f"cProfile over {done} launches, top 20 by own time (us per launch; the profiler inflates small functions):",
        profile_table(stats, done, 20, "tottime"),
        "",
        "Top 20 by cumulative time:",
        profile_table(stats, done, 20, "cumtime"),
    ]
    return "\n".join(text) + "\n"


# -- item 6: an unchanged cell, re-run ------------------------------------------------------------------------------

class Cells:
    """A real IPython shell with the extension loaded, all display formats on (as Jupyter has them), output kept
    off the terminal."""

    def __init__(self):
        from IPython import get_ipython
        from IPython.testing.globalipapp import start_ipython

        self.ip = start_ipython() or get_ipython()  # the global test shell answers None once it has been started
        self.ip.run_line_magic("load_ext", "labmagic")
        formatter = self.ip.display_formatter
        self._saved_types = list(formatter.active_types)
        formatter.active_types = list(formatter.format_types)

    def close(self) -> None:
        self.ip.display_formatter.active_types = self._saved_types

    def run(self, line: str, body: str) -> float:
        """Run ``%%cuda_kernel line`` over ``body``; milliseconds. A cell that fails raises its error."""
        sink = io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stdout(sink):
            result = self.ip.run_cell(f"%%cuda_kernel {line}\n{body}", store_history=False)
        elapsed = (time.perf_counter() - start) * 1e3
        error = result.error_before_exec or result.error_in_exec
        if error is not None:
            raise RuntimeError(f"%%cuda_kernel {line} failed: {type(error).__name__}: {error}") from error
        return elapsed


def measure_cells(cells: Cells, repeats: int) -> list[dict]:
    cells.run("", FIRST_CELL)
    rows = []
    for variant, line in CELL_VARIANTS.items():
        first = cells.run(line, SECOND_CELL)
        times, deadline = [], time.perf_counter() + STEP_BUDGET_S["cell"]
        while len(times) < repeats and (not times or time.perf_counter() < deadline):
            times.append(cells.run(line, SECOND_CELL))
        rows.append({"variant": variant, "median": statistics.median(times), "min": min(times), "first": first,
                     "repeats": len(times)})
    return rows


def tool_report(module) -> list[str]:
    """Which disassembler the panel finds here, what running it on the cell's CUBIN costs and says, and whether
    ``sass.disassemble`` answers from its memo (a failure is not memoized: it would be paid on every re-run)."""
    from labmagic.analysis import sass
    from labmagic.tools import find_tool

    lines, tool = [], None
    for name in ("nvdisasm", "cuobjdump"):
        start = time.perf_counter()
        try:
            found = find_tool(name)
            tool = tool or (name, found)
        except Exception as exc:  # noqa: BLE001
            found = f"{type(exc).__name__}: {exc}"
        lines.append(f"find_tool({name!r}): {found} ({(time.perf_counter() - start) * 1e3:.2f} ms)")
    if tool is not None:
        name, path = tool
        version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
        lines.append(f"{name} --version: {version.splitlines()[-1] if version else '?'}")
        cmd = [path, "-gi", "-c"] if name == "nvdisasm" else [path, "-sass"]
        start = time.perf_counter()
        proc = sass.run_on_cubin(cmd[0], cmd[1:], module.result.cubin)
        ms = (time.perf_counter() - start) * 1e3
        said = f", stderr: {proc.stderr.strip()[:300]}" if proc.stderr.strip() else ""
        lines.append(f"{' '.join(Path(c).name for c in cmd)} on the cell's CUBIN: rc {proc.returncode}, {ms:.1f} ms, "
                     f"{len(proc.stdout)} chars of output{said}")
    for attempt in ("first", "second"):
        start = time.perf_counter()
        try:
            functions = sass.disassemble(module.result.cubin)
            outcome = f"{sum(map(len, functions.values()))} instructions in {len(functions)} functions"
        except Exception as exc:  # noqa: BLE001
            outcome = f"{type(exc).__name__}: {str(exc)[:300]}"
        lines.append(f"sass.disassemble, {attempt} call here: {(time.perf_counter() - start) * 1e3:.2f} ms, {outcome}")
    return lines


def profile_cell(cells: Cells) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    elapsed = cells.run(CELL_VARIANTS["panel_vs"], SECOND_CELL)
    profiler.disable()
    module = labmagic.compile_cuda(SECOND_CELL, first_line=2)  # a cache hit: the cell's own compile
    stats = pstats.Stats(profiler)
    text = [
        f"one cached `%%cuda_kernel {CELL_VARIANTS['panel_vs']}` run on {labmagic.device_slug()}: {elapsed:.2f} ms "
        "under cProfile",
        "",
        *tool_report(module),
        "",
        "Top 25 by cumulative time (ms in this run):",
        profile_table(stats, 1, 25, "cumtime", "ms"),
        "",
        "Top 15 by own time:",
        profile_table(stats, 1, 15, "tottime", "ms"),
        "",
        "labmagic's own functions, top 20 by cumulative time:",
        profile_table(stats, 1, 20, "cumtime", "ms", only=f"labmagic{os.sep}"),
    ]
    return "\n".join(text) + "\n"


# -- output ---------------------------------------------------------------------------------------------------------

def write_csv(path: Path, fields: list[str], rows: list[dict]) -> None:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write(path, buffer.getvalue())


def launch_csv_rows(rows: list[dict], prov: dict) -> list[dict]:
    return [{"what": r["what"], "backend": r["backend"], "us_per_call_median": f"{r['median']:.3f}",
             "us_per_call_min": f"{r['min']:.3f}", "ratio_to_cupy": f"{r['ratio']:.2f}", "calls": r["calls"], **prov}
            for r in rows]


def cell_csv_rows(rows: list[dict], prov: dict) -> list[dict]:
    return [{"variant": r["variant"], "ms_median": f"{r['median']:.3f}", "ms_min": f"{r['min']:.3f}",
             "first_ms": f"{r['first']:.3f}", "repeats": r["repeats"], **prov} for r in rows]


def print_plan(args, out: Path) -> None:
    print(f"plan for a GPU run: {len(LAUNCH_ROWS)} launch rows, {args.batches} batches of {args.calls} calls each "
          f"(after {args.warmup} warm-up calls), ratios to {'/'.join(REFERENCE)}:")
    for what, backend in LAUNCH_ROWS:
        print(f"  {backend:9s} {what}")
    print(f"  then cProfile over {args.profile_calls} labmagic launches and the parts of a launch timed alone "
          f"-> {out / 'launch_overhead.csv'}, {out / 'launch_overhead_profile.txt'}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="folder for the outputs (default results/<gpu>/)")
    parser.add_argument("--calls", type=int, default=2000, help="back-to-back calls per batch (default 2000)")
    parser.add_argument("--batches", type=int, default=15, help="batches per row, taken in turns (default 15)")
    parser.add_argument("--warmup", type=int, default=500, help="calls before timing a row (default 500)")
    parser.add_argument("--profile-calls", type=int, default=20000, help="launches under cProfile (default 20000)")
    parser.add_argument("--repeats", type=int, default=5, help="cached runs per cell variant (default 5)")
    parser.add_argument("--time-limit", type=float, default=115.0,
                        help="seconds after which the run stops itself with a stack dump (default 115)")
    parser.add_argument("--dry-run", action="store_true",
                        help="compile, time the cached cells (works without a GPU), print the launch plan")
    args = parser.parse_args(argv)

    from labmagic.benchmark import provenance
    from labmagic.paths import results_dir

    out = Path(args.out) if args.out else results_dir()
    dry = args.dry_run or not labmagic.has_gpu()
    # The watchdog: a hang in a CUDA call never returns to Python, so no signal handler could stop it; faulthandler's
    # thread dumps every stack and exits. It writes to a file descriptor, so the process's own stderr.
    faulthandler.dump_traceback_later(args.time_limit, exit=True, file=sys.__stderr__)
    try:
        prov = provenance.collect()
        print(f"{'dry run' if args.dry_run else 'no GPU: dry run' if dry else 'GPU run'} on {prov['gpu']} -> {out}")
        errors: list[str] = []
        launch_rows: list[dict] = []
        if dry:
            kernel = labmagic.compile_cuda(TOUCH).touch  # NVRTC, no GPU needed
            print(f"compiled {kernel!r}")
            print_plan(args, out)
        else:
            try:
                launches = Launches(args.calls)
                launches.check()
            except Exception as exc:  # noqa: BLE001  (no launch numbers, but the cached cells can still be timed)
                errors.append(f"setting up the launches: {type(exc).__name__}: {exc}")
            else:
                launch_rows, errors = measure_launches(launches, args.batches, args.warmup)
                write_csv(out / "launch_overhead.csv", LAUNCH_FIELDS + provenance.FIELDS,
                          launch_csv_rows(launch_rows, prov))
                try:
                    atomic_write(out / "launch_overhead_profile.txt",
                                 profile_launches(launches, args.profile_calls, args.batches))
                except Exception as exc:  # noqa: BLE001  (the numbers are written; say why the profile is not)
                    errors.append(f"profiling the launch: {type(exc).__name__}: {exc}")

        cells = Cells()
        try:
            cell_rows = measure_cells(cells, args.repeats)
            cell_profile = profile_cell(cells)
        finally:
            cells.close()
        write_csv(out / "cached_cell.csv", CELL_FIELDS + provenance.FIELDS, cell_csv_rows(cell_rows, prov))
        atomic_write(out / "cached_cell_profile.txt", cell_profile)
    finally:
        faulthandler.cancel_dump_traceback_later()

    if launch_rows:
        print(f"\n{'what':22s}{'backend':10s}{'us/call median':>16s}{'min':>9s}{'x cupy':>8s}")
        for r in launch_rows:
            print(f"{r['what']:22s}{r['backend']:10s}{r['median']:16.2f}{r['min']:9.2f}{r['ratio']:8.2f}")
    print(f"\n{'cached cell':22s}{'ms median':>10s}{'ms min':>9s}{'first ms':>10s}")
    for r in cell_rows:
        print(f"{r['variant']:22s}{r['median']:10.2f}{r['min']:9.2f}{r['first']:10.1f}")
    print(f"written to {out}")
    for error in errors:
        print(f"FAILED {error}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
