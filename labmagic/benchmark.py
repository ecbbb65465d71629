"""A race: variants of one computation, checked against a reference, then timed, on every shape.

A chapter declares its race once, as data (:class:`Race`), and :func:`bench` runs it and returns a
:class:`BenchResult` that renders itself (``labmagic.display.bench``) and converts to a DataFrame. The
order of work is the argument of the book:

1. **Correctness first**, on the awkward ``check_shapes`` with fresh random inputs, against ``ref``
   (``labmagic.checks``). A variant that fails is ``mismatch`` and is never timed; one that raises is
   ``error``; a CUDA variant on a machine without a GPU is ``needs_gpu``. The sweep goes on.
2. **Timing** (``labmagic.timing``), shape by shape from small to large, over rotated input sets. The
   output of the timed calls is checked again afterwards, so a variant cannot be right once and fast
   (and wrong) afterwards. Running out of memory is ``oom`` and skips the variant at larger shapes;
   allocator retries (a cudaMalloc that failed, emptied the cache, and succeeded) are counted.
3. **Judgement** against two roofs (``labmagic.roofline``): the spec sheet (``sol_pct``) and this GPU's
   measured ceilings (``ceiling_pct``); a time below the physical floor is flagged, not celebrated.

With no GPU nothing is timed: the correctness pass runs for what can run on CPU (torch, the Triton
interpreter, Pallas interpret mode) and the result is a prediction for a target GPU (the H200 unless
told otherwise), labelled as such. Prediction rows are not measurements, so nothing is written to
``results/`` on a machine without a GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Mapping, Sequence

from . import checks, roofline
from .errors import LabError, NoGPUError
from .runtime import device_slug, gpu_name, has_gpu

#: Statuses a row can have (the CSV's ``status`` column).
OK, MISMATCH, ERROR, OOM, SKIPPED, NEEDS_GPU, PREDICTED = (
    "ok", "mismatch", "error", "oom", "skipped", "needs_gpu", "predicted")

#: A time this far below the floor is flagged. The measured floor is itself a median of a real kernel,
#: so a variant that ties the best measured pattern within noise is not suspicious; 2% below it is.
FLOOR_SLACK = 0.02

#: Variant-name prefixes and the backend they imply (``cuda_float4`` -> ``cuda``).
BACKEND_PREFIXES = ("torch", "cuda", "cupy", "triton", "pallas", "jax", "cublas", "cudnn", "sdpa")

#: Backends whose work runs on JAX's streams (timed with ``cuda_event_blocking``).
JAX_BACKENDS = ("jax", "pallas")


def _shape(value) -> tuple[int, ...]:
    if isinstance(value, int):
        return (value,)
    return tuple(int(v) for v in value)


def shape_str(shape: Sequence[int]) -> str:
    """``(4096, 4096)`` -> ``"4096x4096"`` (the CSV's shape key)."""
    return "x".join(str(int(s)) for s in shape)


def shape_dims(shape) -> list[int]:
    """The CSV's shape key back: ``"32768x8192"`` -> ``[32768, 8192]``; ``[]`` for one that is not a product of
    integers."""
    try:
        return [int(part) for part in str(shape).split("x")]
    except ValueError:
        return []


def shape_size(shape) -> int:
    """Elements of a CSV shape key (``"32768x8192"`` -> 268435456); 0 when it is not one."""
    dims = shape_dims(shape)
    return math.prod(dims) if dims else 0


@dataclass
class Race:
    """What a chapter races. See the module docstring and the chapter template for each field's use."""

    chapter: str
    variants: Mapping[str, Callable]
    ref: str
    make_inputs: Callable[..., tuple]
    shapes: Sequence = ()
    check_shapes: Sequence = ()
    flops: Callable[..., float] | None = None
    nbytes: Callable[..., float] | None = None
    dtype: str = "float32"
    limits: Mapping[str, int] = field(default_factory=dict)
    sol: float | Mapping[str, float] | None = None
    num_input_sets: int | None = None
    rtol: float | None = None
    atol: float | None = None
    backends: Mapping[str, str] | None = None

    def __post_init__(self):
        self.variants = dict(self.variants)
        if self.ref not in self.variants:
            raise LabError(f"race {self.chapter!r}: ref {self.ref!r} is not one of the variants "
                           f"({', '.join(self.variants)})")
        self.shapes = [_shape(s) for s in self.shapes]
        self.check_shapes = [_shape(s) for s in self.check_shapes]
        unknown = set(self.limits) - set(self.variants)
        if unknown:
            raise LabError(f"race {self.chapter!r}: limits name unknown variants: {', '.join(sorted(unknown))}")

    def backend(self, name: str) -> str:
        """The variant's backend: declared in ``backends``, else its name's prefix (``triton_v2`` -> triton)."""
        if self.backends and name in self.backends:
            return self.backends[name]
        for prefix in BACKEND_PREFIXES:
            if name.startswith(prefix):
                return prefix
        return "other"

    def over_limit(self, name: str, shape: tuple[int, ...]) -> bool:
        limit = self.limits.get(name)
        return limit is not None and math.prod(shape) > limit

    def work(self, shape: tuple[int, ...]) -> tuple[float | None, float | None]:
        """(flops, bytes) of one call at ``shape``."""
        flops = float(self.flops(*shape)) if self.flops else None
        nbytes = float(self.nbytes(*shape)) if self.nbytes else None
        return flops, nbytes


@dataclass
class Row:
    """One variant at one shape: a line of the table and of the CSV."""

    chapter: str
    variant: str
    backend: str
    shape: str
    dtype: str
    status: str
    flops: float | None = None
    nbytes: float | None = None
    ms_median: float | None = None
    ms_min: float | None = None
    ms_max: float | None = None
    tflops: float | None = None
    gbps: float | None = None
    sol_pct: float | None = None
    ceiling_pct: float | None = None
    vs_ref: float | None = None
    predicted_ms: float | None = None
    below_floor: bool = False
    peak_mem_bytes: int | None = None
    alloc_retries: int = 0
    sdpa_backend: str = "-"
    max_rel_err: float | None = None
    timer: str = "-"
    error: str = ""
    source_hash: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class BenchResult:
    """The outcome of :func:`bench`: rows, and what they were measured on (or predicted for)."""

    chapter: str
    rows: list[Row]
    measured: bool
    device: str
    spec: roofline.GpuSpec | None
    ceilings: roofline.Ceilings | None
    timer: str = "-"
    notes: list[str] = field(default_factory=list)
    provenance: dict[str, str] = field(default_factory=dict)
    csv_path: Any = None
    png_path: Any = None
    png: bytes | None = None

    @property
    def shapes(self) -> list[str]:
        return list(dict.fromkeys(r.shape for r in self.rows))

    def row(self, variant: str, shape) -> Row:
        key = shape if isinstance(shape, str) else shape_str(_shape(shape))
        for r in self.rows:
            if r.variant == variant and r.shape == key:
                return r
        raise KeyError((variant, key))

    def to_dataframe(self):
        import pandas as pd

        return pd.DataFrame([r.as_dict() for r in self.rows])

    def csv_rows(self) -> list[dict[str, Any]]:
        """Rows as written to disk: the table's columns plus this run's provenance."""
        return [{**r.as_dict(), **self.provenance} for r in self.rows]

    def save(self, csv_path=None, png_path=None) -> None:
        """Write (replace) this result's rows in the chapter's CSV, and its plot, for this GPU."""
        from . import results

        if not self.measured:
            raise LabError("nothing was measured (no GPU): predictions are not written to results/")
        self.csv_path = results.write_rows(csv_path or results.bench_csv_path(self.chapter), self.csv_rows())
        if png_path is not False:
            from . import plots

            # The saved plots show every row of the CSV, not only the ones this run re-measured.
            whole = load_result(self.csv_path, self.spec, self.ceilings)
            if png_path:
                self.png_path = plots.save_png(whole, png_path)
            else:
                self.png_path = plots.save_chapter_pngs(whole)[self.rows[0].dtype]

    def _repr_html_(self) -> str:
        from .display.bench import render_html

        return render_html(self)

    def __repr__(self) -> str:
        from .display.bench import render_text

        return render_text(self)


def _typed(name: str, text: str):
    """A CSV cell back to the Row field's type."""
    if name in ("ms_median", "ms_min", "ms_max", "tflops", "gbps", "sol_pct", "ceiling_pct", "vs_ref",
                "predicted_ms", "max_rel_err", "flops", "nbytes"):
        return float(text) if text not in ("", None) else None
    if name in ("peak_mem_bytes",):
        return int(float(text)) if text not in ("", None) else None
    if name == "alloc_retries":
        return int(float(text or 0))
    if name == "below_floor":
        return text == "True"
    return text


def load_result(csv_path, spec=None, ceilings=None) -> BenchResult:
    """A chapter's CSV as a :class:`BenchResult` (for plots and tables drawn from ``results/``)."""
    from . import results

    names = [f.name for f in fields(Row)]
    raw = results.read_rows(csv_path)
    rows = [Row(**{n: _typed(n, r.get(n, "")) for n in names if n in r}) for r in raw]
    device = raw[0].get("gpu", "?") if raw else "?"
    timers = ", ".join(sorted({r.timer for r in rows if r.timer and r.timer != "-"})) or "-"
    return BenchResult(rows[0].chapter if rows else "", rows, True, device,
                       spec or roofline.find_spec(device), ceilings, timer=timers, csv_path=csv_path)


# -- correctness -------------------------------------------------------------------------------------

class _Failed(Exception):
    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status


def _is_oom(exc: BaseException) -> bool:
    try:
        import torch

        if isinstance(exc, torch.cuda.OutOfMemoryError):
            return True
    except ImportError:
        pass
    text = f"{type(exc).__name__}: {exc}".lower()
    return "outofmemory" in text or "out of memory" in text or "resource_exhausted" in text


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def _out_nbytes(out) -> int:
    try:
        t = checks.to_torch(out)
        return t.numel() * t.element_size()
    except Exception:  # noqa: BLE001
        return 0


def check_variant(race: Race, name: str, shapes: Sequence[tuple[int, ...]] | None = None) -> float:
    """Check one variant on the race's check shapes; return its worst relative error.

    Raises :class:`_Failed` with the row status (``mismatch``, ``error``, ``needs_gpu``) on failure.
    The reference's output stays alive while the variant runs, and the allocator is poisoned first, so
    an output buffer the variant forgets to write can neither reuse the reference's correct result nor
    read as zeros that happen to be right.
    """
    rtol, atol = checks.tolerances(race.dtype, race.rtol, race.atol)
    fn, ref = race.variants[name], race.variants[race.ref]
    worst = 0.0
    for shape in race.check_shapes if shapes is None else shapes:
        inputs = race.make_inputs(*shape)
        try:
            expected = ref(*inputs)
        except Exception as exc:  # noqa: BLE001
            raise _Failed(ERROR, f"reference {race.ref!r} failed at {shape_str(shape)}: {_describe(exc)}") from exc
        checks.poison_allocator(_out_nbytes(expected), checks.to_torch(inputs[0]).device
                                if inputs and hasattr(inputs[0], "device") else "cpu")
        try:
            out = fn(*inputs)
        except NoGPUError as exc:
            raise _Failed(NEEDS_GPU, str(exc)) from exc
        except Exception as exc:  # noqa: BLE001 - a raising variant is a row, not a crash
            raise _Failed(ERROR, f"at {shape_str(shape)}: {_describe(exc)}") from exc
        result = checks.compare(out, expected, rtol, atol)
        if not result:
            raise _Failed(MISMATCH, f"at {shape_str(shape)}: {result.reason}")
        worst = max(worst, result.max_rel_err)
    return worst


def recheck(race: Race, output, inputs: tuple) -> checks.CheckResult:
    """Compare the output of a *timed* call with the reference on the same inputs."""
    rtol, atol = checks.tolerances(race.dtype, race.rtol, race.atol)
    return checks.compare(output, race.variants[race.ref](*inputs), rtol, atol)


# -- measurement -------------------------------------------------------------------------------------

def _tensor_bytes(inputs) -> int:
    total = 0
    for x in inputs:
        if hasattr(x, "element_size") and hasattr(x, "numel"):
            total += x.numel() * x.element_size()
        elif hasattr(x, "nbytes"):
            total += int(x.nbytes)
    return total


def auto_input_sets(set_bytes: int, l2_bytes: int, budget_bytes: int) -> int:
    """Enough distinct input sets that one pass over them is 3x the L2 (so nothing stays resident),
    within a memory budget and at most 256 (tiny problems live in L2 anyway; the timer says so)."""
    if set_bytes <= 0:
        return 1
    want = math.ceil(3 * l2_bytes / set_bytes)
    return int(max(1, min(want, 256, budget_bytes // set_bytes)))


def _mentions_sdpa(fn) -> bool:
    from .provenance import _own_text, _referenced

    texts = [_own_text(fn) or ""] + [_own_text(o) or "" for o in _referenced(fn)]
    return any("scaled_dot_product" in t or "sdpa" in t for t in texts)


#: aten op names of SDPA's implementations, as the profiler records them.
_SDPA_OPS = {
    "_scaled_dot_product_flash_attention": "flash",
    "_scaled_dot_product_efficient_attention": "mem_efficient",
    "_scaled_dot_product_cudnn_attention": "cudnn",
    "_scaled_dot_product_attention_math": "math",
    "_scaled_dot_product_fused_attention_overrideable": "overrideable",
}


def sdpa_backend(fn, inputs) -> str:
    """Which SDPA implementation serviced one call of ``fn``, read from torch's profiler op names.

    ``torch.nn.functional.scaled_dot_product_attention`` dispatches to one aten op per backend; the
    profiler (CPU activity only, cheap) records which ran. ``-`` when no SDPA op ran.
    """
    import torch

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn(*inputs)
    found = []
    for event in prof.events():
        op = event.name.removeprefix("aten::")
        if op in _SDPA_OPS:
            found.append(_SDPA_OPS[op])
    return "+".join(dict.fromkeys(found)) or "-"


def _device_of(inputs) -> str:
    for x in inputs:
        dev = getattr(x, "device", None)
        if dev is not None and hasattr(dev, "type"):
            return dev.type
    return "cpu"


def _measure(race: Race, name: str, input_sets: list[tuple], timer, set_bytes: int, row: Row) -> None:
    """Time one variant at one shape into ``row`` (status stays ``ok`` unless the re-check fails)."""
    fn = race.variants[name]
    on_gpu = _device_of(input_sets[0]) == "cuda"
    if on_gpu:
        import torch

        torch.cuda.synchronize()
        retries0 = torch.cuda.memory_stats().get("num_alloc_retries", 0)
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        out = fn(*input_sets[0])
        from .timing import block_until_ready

        block_until_ready(out)
        torch.cuda.synchronize()
        # torch's allocator sees torch (and torch-allocated CuPy/Triton outputs), not JAX's own pool.
        if row.backend not in JAX_BACKENDS:
            row.peak_mem_bytes = int(torch.cuda.max_memory_allocated() - base)
        del out
    timing = timer.time(fn, input_sets, blocking=row.backend in JAX_BACKENDS, set_bytes=set_bytes)
    result = recheck(race, timing.output, input_sets[timing.output_set])
    if on_gpu:
        row.alloc_retries = int(torch.cuda.memory_stats().get("num_alloc_retries", 0) - retries0)
        if _mentions_sdpa(fn):
            row.sdpa_backend = sdpa_backend(fn, input_sets[0])
    row.timer = timing.method
    if timing.notes:
        row.error = "; ".join(timing.notes)
    if not result:
        row.status, row.error = MISMATCH, f"re-check after timing: {result.reason}"
        return
    row.max_rel_err = max(row.max_rel_err or 0.0, result.max_rel_err)
    row.ms_median, row.ms_min, row.ms_max = timing.median_ms, timing.min_ms, timing.max_ms


def _judge(row: Row, flops, nbytes, spec_roof, meas_roof) -> None:
    """Fill the derived columns: throughput, % of each roof, the floor and whether we beat it."""
    floor_roof = meas_roof or spec_roof
    row.predicted_ms = floor_roof.floor_ms(flops, nbytes) if floor_roof else None
    ms = row.ms_median
    if ms is None or ms <= 0:
        return
    row.tflops = flops / (ms * 1e-3) / 1e12 if flops else None
    row.gbps = nbytes / (ms * 1e-3) / 1e9 if nbytes else None
    row.sol_pct = spec_roof.pct(ms, flops, nbytes) if spec_roof else None
    row.ceiling_pct = meas_roof.pct(ms, flops, nbytes) if meas_roof else None
    row.below_floor = bool(row.predicted_ms and ms < (1 - FLOOR_SLACK) * row.predicted_ms)


def _default_timer(rep_ms, warmup_ms):
    from .timing import CudaTimer

    kwargs = {k: v for k, v in (("rep_ms", rep_ms), ("warmup_ms", warmup_ms)) if v is not None}
    return CudaTimer(**kwargs)


def bench(race: Race, *, shapes=None, variants: Sequence[str] | None = None, check: bool = True,
          save: bool | None = None, target: str | None = None, timer=None, plot: bool = True,
          rep_ms: float | None = None, warmup_ms: float | None = None) -> BenchResult:
    """Check, time and judge every variant of ``race``; see the module docstring.

    ``shapes`` / ``variants`` narrow the race (the reference always runs: ``vs_ref`` needs it).
    ``target`` names the GPU whose spec the table is judged (or, without a GPU, predicted) against.
    ``timer`` replaces the CUDA-event timer (``labmagic.timing.WallTimer`` measures on CPU; its rows
    are never saved automatically). ``save`` defaults to True exactly when a GPU measured the rows.
    """
    shapes = [_shape(s) for s in (race.shapes if shapes is None else shapes)]
    shapes.sort(key=math.prod)
    names = list(race.variants) if variants is None else list(dict.fromkeys([race.ref, *variants]))
    unknown = [n for n in names if n not in race.variants]
    if unknown:
        raise LabError(f"unknown variants: {', '.join(unknown)} (race has {', '.join(race.variants)})")

    gpu = has_gpu()
    measured = timer is not None or gpu
    if timer is None and gpu:
        timer = _default_timer(rep_ms, warmup_ms)
    spec = roofline.find_spec(target) if target else roofline.find_spec(gpu_name() if gpu else None)
    if target and spec is None:
        raise LabError(f"unknown target GPU {target!r}; known: {', '.join(roofline.SPECS)}")
    if spec is None and not gpu:
        spec = roofline.SPECS[roofline.DEFAULT_TARGET]
    ceilings = roofline.load_ceilings(device_slug()) if gpu else None
    notes: list[str] = []
    if gpu and ceilings is None:
        notes.append(f"no measured ceilings for {device_slug()}: run `labmagic calibrate` (floors use the spec)")

    # 1. correctness, once per variant
    verdict: dict[str, tuple[str, str, float | None]] = {}
    for name in names:
        if not check:
            verdict[name] = (OK, "", None)
            continue
        try:
            verdict[name] = (OK, "", check_variant(race, name))
        except _Failed as failure:
            verdict[name] = (failure.status, str(failure), None)

    rows: list[Row] = []
    oom_at: dict[str, str] = {}
    for shape in shapes:
        flops, nbytes = race.work(shape)
        s_roof = roofline.spec_roof(spec, race.dtype, race.sol, flops=flops, nbytes=nbytes)
        m_roof = roofline.measured_roof(ceilings, race.dtype)
        shape_rows = {}
        for name in names:
            backend = race.backend(name)
            status, error, rel = verdict[name]
            row = Row(race.chapter, name, backend, shape_str(shape), str(race.dtype), status,
                      flops=flops, nbytes=nbytes, max_rel_err=rel, error=error)
            if status == OK and race.over_limit(name, shape):
                row.status, row.error = SKIPPED, f"above limit {race.limits[name]}"
            elif status == OK and name in oom_at:
                row.status, row.error = SKIPPED, f"ran out of memory at {oom_at[name]}"
            elif status == OK and not measured:
                row.status = NEEDS_GPU if backend == "cuda" and not check else PREDICTED
            shape_rows[name] = row
        if measured:
            _run_shape(race, shape, names, shape_rows, timer, oom_at, notes)
        ref_row = shape_rows[race.ref]
        for row in shape_rows.values():
            _judge(row, flops, nbytes, s_roof, m_roof)
            if row.ms_median and ref_row.ms_median:
                row.vs_ref = ref_row.ms_median / row.ms_median
        rows.extend(shape_rows.values())

    result = BenchResult(race.chapter, rows, measured, gpu_name() or ("cpu" if measured else "no GPU"),
                         spec, ceilings, notes=notes)
    if measured:
        from . import provenance

        result.provenance = provenance.collect()
        hashes = {name: provenance.source_hash(race.variants[name]) for name in names}
        for row in rows:
            row.source_hash = hashes[row.variant]
        result.timer = ", ".join(sorted({r.timer for r in rows if r.timer != "-"})) or "-"
        if plot and any(r.ms_median for r in rows):
            from . import plots

            result.png = plots.png_bytes(result)
    if save is None:
        save = gpu and timer is not None and type(timer).__name__ == "CudaTimer"
    if save:
        if measured:
            result.save()
        else:
            result.notes.append("nothing measured, nothing saved")
    return result


def _run_shape(race: Race, shape, names, shape_rows: dict[str, Row], timer, oom_at, notes) -> None:
    """Make this shape's input sets and time every variant still in the race on them."""
    todo = [n for n in names if shape_rows[n].status == OK]
    if not todo:
        return
    try:
        first = race.make_inputs(*shape)
        set_bytes = _tensor_bytes(first)
        k = race.num_input_sets
        if k is None:
            if _device_of(first) == "cuda":
                import torch

                free, _ = torch.cuda.mem_get_info()
                k = auto_input_sets(set_bytes, timer.l2_bytes() if hasattr(timer, "l2_bytes") else 0, free // 4)
            else:
                k = 2
        input_sets = [first] + [race.make_inputs(*shape) for _ in range(max(1, k) - 1)]
    except Exception as exc:  # noqa: BLE001
        status = OOM if _is_oom(exc) else ERROR
        for n in todo:
            shape_rows[n].status, shape_rows[n].error = status, f"making inputs: {_describe(exc)}"
            if status == OOM:
                oom_at[n] = shape_str(shape)
        _release()
        return
    for name in todo:
        row = shape_rows[name]
        try:
            _measure(race, name, input_sets, timer, set_bytes, row)
        except NoGPUError as exc:
            row.status, row.error = NEEDS_GPU, str(exc)
        except Exception as exc:  # noqa: BLE001 - one variant's failure is a row, not the end of the sweep
            if _is_oom(exc):
                row.status, row.error = OOM, _describe(exc)
                oom_at[name] = shape_str(shape)
            else:
                row.status, row.error = ERROR, _describe(exc)
            _release()
    del input_sets
    _release()


def _release() -> None:
    """Give cached device memory back between shapes, so one variant's pool does not starve the next."""
    import gc

    gc.collect()
    if has_gpu():
        import torch

        torch.cuda.synchronize()
        torch.cuda.empty_cache()
