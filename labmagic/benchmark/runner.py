"""Running a race: every variant checked against the reference, then timed, then judged, on every shape.

A chapter declares its race once, as data (:class:`~labmagic.benchmark.race.Race`), and :func:`bench` runs it and
returns a :class:`~labmagic.benchmark.race.BenchResult`. The order of work is the argument of the book:

1. **Correctness first**, on the awkward ``check_shapes`` with fresh random inputs, against ``ref``
   (:mod:`labmagic.benchmark.checks`). A variant that fails is ``mismatch`` and is never timed; one that raises is
   ``error``; a CUDA variant on a machine without a GPU is ``needs_gpu``, one in a DSL that is not installed
   (:mod:`labmagic.dsl`) is ``skipped``. The sweep goes on. With ``sanitize``, a CUDA variant that passed runs again
   under compute-sanitizer memcheck (:mod:`labmagic.benchmark.sanitizer_check`), which sees the out-of-bounds writes
   that the allocator's slack hides from the comparison.
2. **Timing** (:mod:`labmagic.timing`), shape by shape from small to large, over rotated input sets. The
   output of the timed calls is checked again afterwards, so a variant cannot be right once and fast
   (and wrong) afterwards. Then a few eager calls give the row's host time and isolated latency
   (:func:`labmagic.timing.time_host`): a row whose host time exceeds its device time is host-bound. Running out of
   memory is ``oom`` and skips the variant at larger shapes; allocator retries (a cudaMalloc that failed, emptied the
   cache, and succeeded) are counted. Each median gets its 95% interval over the timed calls, and ``vs_ref`` the
   interval of the ratio (:mod:`labmagic.timing.noise`): a ratio whose interval holds 1.00 is a tie in this run,
   whatever its second decimal says.
3. **Judgement** against two roofs (:mod:`labmagic.benchmark.roofline`): the spec sheet (``sol_pct``) and this GPU's
   measured ceilings (``ceiling_pct``, above 100% for a kernel ahead of cuBLAS or the copy); a time below the
   physical floor, the spec sheet's, is flagged, not celebrated.

With no GPU nothing is timed: the correctness pass runs for what can run on CPU (torch, the Triton
interpreter, Pallas interpret mode) and the result is a prediction for a target GPU (the H200 unless
told otherwise), labelled as such. Prediction rows are not measurements, so nothing is written to
``results/`` on a machine without a GPU.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

from ..dsl import DSLUnavailable
from ..errors import LabError, NoGPUError, UnsupportedInput, describe
from ..runtime import device_slug, gpu_name, has_gpu
from ..store import manifest
from ..store.schema import ERROR, MISMATCH, NEEDS_GPU, OK, OOM, PREDICTED, SKIPPED, Row, shape_str, shape_tuple
from ..timing.noise import ratio_interval
from . import checks, roofline
from .race import JAX_BACKENDS, TIMERS, BenchResult, Race, callable_identity
from .sdpa import mentions_sdpa, sdpa_backend

# -- correctness -------------------------------------------------------------------------------------

class CheckFailed(Exception):
    """A variant failed its correctness check: ``status`` is the row's status, ``shape`` the check shape it
    failed at (None when no single shape is to blame, e.g. ``needs_gpu``), ``err_over_tol`` the mismatch's worst
    error as a fraction of the tolerance (None unless an output was compared; see :mod:`.checks`)."""

    def __init__(self, status: str, message: str, shape: tuple[int, ...] | None = None,
                 err_over_tol: float | None = None):
        super().__init__(message)
        self.status = status
        self.shape = shape
        self.err_over_tol = err_over_tol


def _is_oom(exc: BaseException) -> bool:
    try:
        import torch

        if isinstance(exc, torch.cuda.OutOfMemoryError):
            return True
    except ImportError:
        pass
    text = f"{type(exc).__name__}: {exc}".lower()
    return "outofmemory" in text or "out of memory" in text or "resource_exhausted" in text


def _out_nbytes(out) -> int:
    if isinstance(out, (tuple, list)):
        return sum(_out_nbytes(part) for part in out)
    try:
        t = checks.to_torch(out)
        return t.numel() * t.element_size()
    except Exception:  # noqa: BLE001
        return 0


def check_variant(race: Race, name: str, shapes: Sequence[tuple[int, ...]] | None = None) -> float | None:
    """Check one variant on the race's check shapes; return its worst error as a fraction of the tolerance,
    ``|out - ref| / (atol + rtol * |ref|)`` (at most 1, since it passed; None: no shape to check).

    Raises :class:`CheckFailed` with the row status (``mismatch``, ``error``, ``needs_gpu``) on failure. A shape
    the variant refuses by design (:class:`~labmagic.errors.UnsupportedInput`) is passed over; a variant that takes
    none of them is ``skipped``, with why, rather than timed unchecked.

    The reference's output stays alive while the variant runs, and the allocator is poisoned first, so
    an output buffer the variant forgets to write can neither reuse the reference's correct result nor
    read as zeros that happen to be right.
    """
    fn, ref = race.variants[name], race.variants[race.ref]
    worst, refused = None, None
    for shape in race.check_shapes if shapes is None else shapes:
        rtol, atol = race.tolerances(shape)
        inputs = _check_inputs(race, shape)
        try:
            expected = ref(*inputs)
        except Exception as exc:  # noqa: BLE001
            raise CheckFailed(ERROR, f"reference {race.ref!r} failed at {shape_str(shape)}: {describe(exc)}",
                              shape) from exc
        checks.poison_allocator(_out_nbytes(expected), checks.to_torch(inputs[0]).device
                                if inputs and hasattr(inputs[0], "device") else "cpu")
        try:
            out = fn(*inputs)
        except NoGPUError as exc:
            raise CheckFailed(NEEDS_GPU, str(exc)) from exc
        except DSLUnavailable as exc:  # its DSL is not installed here: a skipped row that says so
            raise CheckFailed(SKIPPED, str(exc)) from exc
        except UnsupportedInput as exc:  # not an input it takes (a peer's limit): checked on the other shapes
            refused = refused or f"at {shape_str(shape)}: {exc}"
            continue
        except Exception as exc:  # noqa: BLE001 - a raising variant is a row, not a crash
            raise CheckFailed(ERROR, f"at {shape_str(shape)}: {describe(exc)}", shape) from exc
        result = checks.compare(out, expected, rtol, atol)
        if not result:
            raise CheckFailed(MISMATCH, f"at {shape_str(shape)}: {result.reason}", shape, result.err_over_tol)
        worst = max(worst or 0.0, result.err_over_tol)
    if worst is None and refused:
        raise CheckFailed(SKIPPED, f"takes none of the check shapes ({refused}): not timed unchecked")
    return worst


def _check_inputs(race: Race, shape: tuple[int, ...]) -> tuple:
    """The race's inputs at a check shape; a ``make_inputs`` that raises is this variant's error row, not a crash."""
    try:
        return race.make_inputs(*shape)
    except Exception as exc:  # noqa: BLE001
        raise CheckFailed(ERROR, f"making inputs at {shape_str(shape)}: {describe(exc)}", shape) from exc


def recheck(race: Race, output, inputs: tuple, shape: Sequence[int] | str) -> checks.CheckResult:
    """Compare the output of a *timed* call at ``shape`` with the reference on the same inputs."""
    rtol, atol = race.tolerances(shape)
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


def gpu_input_sets(set_bytes: int, timer) -> int:
    """:func:`auto_input_sets` as ``%bench`` uses it on a GPU: against the timer's L2 and a quarter of the free
    device memory."""
    import torch

    free, _ = torch.cuda.mem_get_info()
    return auto_input_sets(set_bytes, timer.l2_bytes() if hasattr(timer, "l2_bytes") else 0, free // 4)


def _device_of(inputs) -> str:
    for x in inputs:
        dev = getattr(x, "device", None)
        if dev is not None and hasattr(dev, "type"):
            return dev.type
    return "cpu"


def _measure(race: Race, name: str, input_sets: list[tuple], timer, set_bytes: int, row: Row) -> list[float]:
    """Time one variant at one shape into ``row`` (status stays ``ok`` unless the re-check fails); return the
    timed samples (empty when the re-check failed)."""
    retries0 = _first_call(race, name, input_sets, row)
    timing = timer.time(race.variants[name], input_sets, blocking=row.backend in JAX_BACKENDS, set_bytes=set_bytes)
    samples = _record(race, name, timing, input_sets, row, retries0)
    _host_figures(timer, race.variants[name], input_sets, row)
    return samples


def _host_figures(timer, fn, input_sets: list[tuple], row: Row) -> None:
    """A timed row's host time and isolated latency (the timer's ``host``, :func:`labmagic.timing.time_host`),
    measured after the device timing and its re-check, so the calls cannot change the output that was re-checked.
    A timer without ``host`` leaves them empty; a call that raises now leaves them empty and says so."""
    host = getattr(timer, "host", None)
    if host is None or row.status != OK or row.ms_median is None:
        return
    started = time.perf_counter()
    try:
        figures = host(fn, input_sets, row.ms_median)
    except Exception as exc:  # noqa: BLE001 - the device time stands; only the host figures are missing
        row.error = "; ".join(part for part in (row.error, f"host timing failed: {describe(exc)}") if part)
        return
    finally:
        manifest.note_host_seconds(time.perf_counter() - started)  # what they cost the sweep, in its record
    row.host_ms, row.isolated_ms = figures.host_ms, figures.isolated_ms


def _first_call(race: Race, name: str, input_sets: list[tuple], row: Row) -> int | None:
    """One untimed call on a GPU, for the variant's peak memory; the allocator's retry count before timing
    (None off the GPU)."""
    if _device_of(input_sets[0]) != "cuda":
        return None
    import torch

    from ..timing import block_until_ready

    torch.cuda.synchronize()
    retries0 = torch.cuda.memory_stats().get("num_alloc_retries", 0)
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    out = race.variants[name](*input_sets[0])
    block_until_ready(out)
    torch.cuda.synchronize()
    # torch's allocator sees torch (and torch-allocated CuPy/Triton outputs), not JAX's own pool.
    if row.backend not in JAX_BACKENDS:
        row.peak_mem_bytes = int(torch.cuda.max_memory_allocated() - base)
    del out
    return retries0


def _record(race: Race, name: str, timing, input_sets: list[tuple], row: Row, retries0: int | None) -> list[float]:
    """Re-check the timed calls' output and fill ``row`` from ``timing``; the samples (empty on a mismatch)."""
    fn = race.variants[name]
    result = recheck(race, timing.output, input_sets[timing.output_set], row.shape)
    if retries0 is not None:
        import torch

        row.alloc_retries = int(torch.cuda.memory_stats().get("num_alloc_retries", 0) - retries0)
        if mentions_sdpa(fn):
            row.sdpa_backend = sdpa_backend(fn, input_sets[0])
    row.timer = timing.method
    if timing.notes:
        row.error = "; ".join(timing.notes)
    if not result:
        row.status, row.error = MISMATCH, f"re-check after timing: {result.reason}"
        return []
    row.err_over_tol = max(row.err_over_tol or 0.0, result.err_over_tol)
    row.ms_median, row.ms_min, row.ms_max = timing.median_ms, timing.min_ms, timing.max_ms
    row.ms_ci_low, row.ms_ci_high = timing.median_interval_ms or (None, None)
    row.samples = len(timing.times_ms)
    return timing.times_ms


def judge(row: Row, flops, nbytes, spec: roofline.GpuSpec | None, ceilings: roofline.Ceilings | None,
          sol=None) -> None:
    """Fill the derived columns: throughput, % of the spec roof (``sol`` applied) and of the measured ceiling,
    the physical floor and whether the time beats it.

    The floor is physics: the spec sheet's bandwidth and peak rate for the row's dtype (:func:`roofline.floor_ms`),
    never the measured ceiling, which is a library's result that a kernel may pass (``ceiling_pct`` above 100).
    """
    row.predicted_ms = roofline.floor_ms(spec, row.dtype, flops, nbytes)
    ms = row.ms_median
    if ms is None or ms <= 0:
        return
    s_roof = roofline.spec_roof(spec, row.dtype, sol, flops=flops, nbytes=nbytes)
    m_roof = roofline.measured_roof(ceilings, row.dtype)
    row.tflops = flops / (ms * 1e-3) / 1e12 if flops else None
    row.gbps = nbytes / (ms * 1e-3) / 1e9 if nbytes else None
    row.sol_pct = s_roof.pct(ms, flops, nbytes) if s_roof else None
    row.ceiling_pct = m_roof.pct(ms, flops, nbytes) if m_roof else None
    row.below_floor = roofline.below_floor(ms, row.predicted_ms)


def _default_timer(rep_ms, warmup_ms, graph: bool = False):
    from ..timing import CudaTimer

    kwargs = {k: v for k, v in (("rep_ms", rep_ms), ("warmup_ms", warmup_ms)) if v is not None}
    return CudaTimer(graph=graph, **kwargs)


def _timer_named(race: Race, timer, gpu: bool, rep_ms, warmup_ms):
    """The timer to measure with: ``timer`` itself when it is one; by name (``bench(timer=...)``, else
    ``Race(timer=...)``, else ``events``) the CUDA timer on a GPU, and None without one (nothing is measured)."""
    if timer is not None and not isinstance(timer, str):
        return timer
    name = timer or race.timer or "events"
    if name not in TIMERS:
        raise LabError(f"unknown timer {name!r}: one of {', '.join(TIMERS)} (or a timer object)")
    if not gpu:
        return None
    return _default_timer(race.rep_ms or rep_ms, warmup_ms, graph=name == "graph")  # the race's rep_ms wins


def bench(race: Race, *, shapes=None, variants: Sequence[str] | None = None, check: bool = True,
          save: bool | None = None, target: str | None = None, timer=None, plot: bool = True,
          rep_ms: float | None = None, warmup_ms: float | None = None, sanitize: bool = False,
          save_png: bool = True) -> BenchResult:
    """Check, time and judge every variant of ``race``; see the module docstring.

    ``shapes`` / ``variants`` narrow the race (the reference always runs: ``vs_ref`` needs it).
    ``target`` names the GPU whose spec the table is judged (or, without a GPU, predicted) against.
    ``timer`` names the CUDA timer's method (``"events"``, ``"graph"``: :data:`~.race.TIMERS`; default the race's
    ``timer``, else events) or replaces the CUDA timer (``labmagic.timing.WallTimer`` measures on CPU; its rows are
    never saved automatically). ``save`` defaults to True exactly when a GPU measured the rows, and
    ``save_png=False`` leaves the chapter's plots on disk as they were.
    ``sanitize`` runs each CUDA variant that passed the check once more under compute-sanitizer memcheck, in a
    child, before anything is timed (:mod:`labmagic.benchmark.sanitizer_check`); a finding makes it an ``error`` row.
    """
    shapes = _shapes_in_order(race, shapes)
    if not shapes:  # no rows would come of it, and a save would write a CSV holding only its header
        raise LabError(f"race {race.chapter!r} has no shapes to time: give Race(shapes=[...]), "
                       "bench(race, shapes=[...]) or %bench --shapes")
    names = _variants_to_run(race, variants)
    _refuse_shared_rows(race, names, shapes)
    gpu = has_gpu()
    measured = (timer is not None and not isinstance(timer, str)) or gpu
    timer = _timer_named(race, timer, gpu, rep_ms, warmup_ms)
    spec, ceilings, notes = _roofs(target, gpu)
    verdicts = _check_all(race, names, check)
    notes += _unchecked(race, check)
    if sanitize and not gpu:
        notes.append("sanitize needs a GPU: nothing ran under memcheck")
    elif sanitize:
        from .sanitizer_check import sanitize_checked  # imports the child's tooling only when asked

        sanitize_checked(race, names, verdicts, notes)
    rows: list[Row] = []
    oom_at: dict[str, str] = {}
    for shape in shapes:
        rows.extend(_shape_rows(race, shape, names, verdicts, measured=measured, check=check, timer=timer,
                                spec=spec, ceilings=ceilings, oom_at=oom_at, notes=notes))
    result = BenchResult(race.chapter, rows, measured, gpu_name() or ("cpu" if measured else "no GPU"),
                         spec, ceilings, notes=notes)
    manifest.note_rows(rows)  # in a sweep, what the race found goes into the chapter's run record
    if measured:
        _stamp(result, race, names, plot)
    if save is None:
        save = gpu and timer is not None and type(timer).__name__ == "CudaTimer"
    if save:
        if measured:
            result.save(png_path=None if save_png else False)
        else:
            result.notes.append("nothing measured, nothing saved")
    return result


def _refuse_shared_rows(race: Race, names: Sequence[str], shapes) -> None:
    """A LabError, before anything runs, when another race of the session (a race in IPython's namespace: a
    chapter's races live there) times a *different* callable under a name and shape this race also writes: both
    would write the same CSV row (chapter, variant, shape, dtype) and the later would silently replace the earlier.
    Chapter 09 lost its decode reference's row so once, its prefill race calling its own reference by the same name
    at the same ``1x4096``. The same callables (a race narrowed with ``dataclasses.replace``) are one measurement."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    ip = get_ipython()
    if ip is None:
        return
    from ..child.replay import races_in

    mine = {shape_str(s) for s in shapes}
    for other_name, other in races_in(ip.user_ns):
        if other is race or other.chapter != race.chapter or other.dtype != race.dtype:
            continue
        both = sorted(mine & {shape_str(s) for s in other.shapes})
        clash = [(v, s) for v in names if v in other.variants
                 and callable_identity(race.variants[v]) != callable_identity(other.variants[v]) for s in both]
        if clash:
            more = f" and {len(clash) - 3} more" if len(clash) > 3 else ""
            raise LabError(f"race {race.chapter!r}: {other_name} times other code under the same names and shapes "
                           f"({', '.join(f'{v} at {s}' for v, s in clash[:3])}{more}, {race.dtype}): both write one "
                           f"row of {race.chapter}.csv and the later run would replace the earlier; give one race's "
                           "variants their own names")


def _shapes_in_order(race: Race, shapes) -> list[tuple[int, ...]]:
    """The shapes to time, smallest first (an out-of-memory at one size skips the larger ones)."""
    return sorted((shape_tuple(s) for s in (race.shapes if shapes is None else shapes)), key=math.prod)


def _variants_to_run(race: Race, variants: Sequence[str] | None) -> list[str]:
    names = list(race.variants) if variants is None else list(dict.fromkeys([race.ref, *variants]))
    unknown = [n for n in names if n not in race.variants]
    if unknown:
        raise LabError(f"unknown variants: {', '.join(unknown)} (race has {', '.join(race.variants)})")
    return names


def _roofs(target: str | None, gpu: bool) -> tuple[roofline.GpuSpec | None, roofline.Ceilings | None, list[str]]:
    """The spec the rows are judged (or predicted) against, this GPU's measured ceilings, and notes about them."""
    spec = roofline.find_spec(target) if target else roofline.find_spec(gpu_name() if gpu else None)
    if target and spec is None:
        raise LabError(f"unknown target GPU {target!r}; known: {', '.join(roofline.SPECS)}")
    if spec is None and not gpu:
        spec = roofline.SPECS[roofline.DEFAULT_TARGET]
    ceilings = roofline.load_ceilings(device_slug()) if gpu else None
    notes: list[str] = []
    if gpu and ceilings is None:
        notes.append(f"no measured ceilings for {device_slug()}: run `labmagic calibrate` (floors use the spec)")
    return spec, ceilings, notes


def _check_all(race: Race, names: list[str], check: bool) -> dict[str, tuple[str, str, float | None]]:
    """1. Correctness, once per variant: name -> (status, error, worst error as a fraction of the tolerance)."""
    verdicts: dict[str, tuple[str, str, float | None]] = {}
    for name in names:
        if not check:
            verdicts[name] = (OK, "", None)
            continue
        try:
            verdicts[name] = (OK, "", check_variant(race, name))
        except CheckFailed as failure:
            verdicts[name] = (failure.status, str(failure), None)
    return verdicts


def _unchecked(race: Race, check: bool) -> list[str]:
    """A warning when the correctness pass had nothing to run on: passing it then proves nothing."""
    if check and not race.check_shapes:
        return [f"race {race.chapter!r} has no check_shapes: nothing was checked before timing "
                "(a wrong variant is caught only by the re-check of timed outputs, and not at all in a prediction)"]
    return []


def _shape_rows(race: Race, shape, names, verdicts, *, measured, check, timer, spec, ceilings, oom_at,
                notes) -> list[Row]:
    """2. and 3. One shape: a row per variant, timed where it can be, then judged against both roofs."""
    try:
        flops, nbytes = race.work(shape)
        work_error = ""
    except Exception as exc:  # noqa: BLE001 - the race's own formula failing is this shape's rows, not a crash
        flops = nbytes = None
        work_error = f"flops/nbytes at {shape_str(shape)}: {describe(exc)}"
    shape_rows = {}
    for name in names:
        backend = race.backend(name)
        status, error, rel = verdicts[name]
        row = Row(race.chapter, name, backend, shape_str(shape), str(race.dtype), status,
                  flops=flops, nbytes=nbytes, err_over_tol=rel, error=error)
        if status == OK and work_error:
            row.status, row.error = ERROR, work_error
        elif status == OK and race.over_limit(name, shape):
            row.status, row.error = SKIPPED, f"above limit {race.limits[name]}"
        elif status == OK and name in oom_at:
            row.status, row.error = SKIPPED, f"ran out of memory at {oom_at[name]}"
        elif status == OK and not measured:
            row.status = NEEDS_GPU if backend == "cuda" and not check else PREDICTED
        shape_rows[name] = row
    samples = _run_shape(race, shape, names, shape_rows, timer, oom_at, notes) if measured else {}
    ref_row = shape_rows[race.ref]
    for name, row in shape_rows.items():
        judge(row, flops, nbytes, spec, ceilings, race.sol)
        if row.ms_median and ref_row.ms_median:
            row.vs_ref = ref_row.ms_median / row.ms_median
            if name != race.ref and samples.get(name) and samples.get(race.ref):
                row.vs_ref_low, row.vs_ref_high = ratio_interval(samples[race.ref], samples[name]) or (None, None)
    return list(shape_rows.values())


def _stamp(result: BenchResult, race: Race, names: list[str], plot: bool) -> None:
    """Provenance, each variant's source hash, the timers used, and the plot, on a measured result."""
    from . import provenance

    result.provenance = provenance.collect()
    hashes = {name: provenance.source_hash(race.variants[name]) for name in names}
    chapter = provenance.chapter_fingerprint(race.chapter)
    for row in result.rows:
        row.source_hash = hashes[row.variant]
        row.chapter_hash = chapter
    result.timer = ", ".join(sorted({r.timer for r in result.rows if r.timer != "-"})) or "-"
    if plot and any(r.ms_median for r in result.rows):
        from ..display import plots

        result.png = plots.png_bytes(result)


def _run_shape(race: Race, shape, names, shape_rows: dict[str, Row], timer, oom_at,
               notes) -> dict[str, list[float]]:
    """Make this shape's input sets and time every variant still in the race on them; return each timed
    variant's samples (for the intervals of ``vs_ref``)."""
    todo = [n for n in names if shape_rows[n].status == OK]
    samples: dict[str, list[float]] = {}
    if not todo:
        return samples
    try:
        first = race.make_inputs(*shape)
        set_bytes = _tensor_bytes(first)
        k = race.num_input_sets
        if k is None:
            k = gpu_input_sets(set_bytes, timer) if _device_of(first) == "cuda" else 2
        input_sets = [first] + [race.make_inputs(*shape) for _ in range(max(1, k) - 1)]
    except Exception as exc:  # noqa: BLE001
        status = OOM if _is_oom(exc) else ERROR
        for n in todo:
            shape_rows[n].status, shape_rows[n].error = status, f"making inputs: {describe(exc)}"
            if status == OOM:
                oom_at[n] = shape_str(shape)
        _release()
        return samples
    if race.rounds > 1 and len(todo) > 1 and hasattr(timer, "prepare"):
        samples = _measure_in_rounds(race, shape, todo, input_sets, timer, set_bytes, shape_rows, oom_at)
    else:
        for name in todo:
            try:
                samples[name] = _measure(race, name, input_sets, timer, set_bytes, shape_rows[name])
            except Exception as exc:  # noqa: BLE001 - one variant's failure is a row, not the end of the sweep
                _failed(shape_rows[name], exc, oom_at, shape)
    del input_sets
    _release()
    return samples


def _failed(row: Row, exc: BaseException, oom_at: dict, shape) -> None:
    """A variant that raised while timed: its row says why (``needs_gpu``, ``skipped``, ``oom``, ``error``)."""
    if isinstance(exc, NoGPUError):
        row.status, row.error = NEEDS_GPU, str(exc)
        return
    if isinstance(exc, (DSLUnavailable, UnsupportedInput)):  # not installed, or not an input it takes
        row.status, row.error = SKIPPED, str(exc)
        return
    if _is_oom(exc):
        row.status, row.error = OOM, describe(exc)
        oom_at[row.variant] = shape_str(shape)
    else:
        row.status, row.error = ERROR, describe(exc)
    _release()


def _measure_in_rounds(race: Race, shape, todo: list[str], input_sets: list[tuple], timer, set_bytes: int,
                       shape_rows: dict[str, Row], oom_at: dict) -> dict[str, list[float]]:
    """``Race(rounds=N)``: every variant's first call, then all of them timed in turns
    (:func:`labmagic.timing.time_in_rounds`), then each re-checked and recorded."""
    from ..timing import time_in_rounds

    retries0, ready = {}, {}
    for name in todo:
        try:
            retries0[name] = _first_call(race, name, input_sets, shape_rows[name])
            ready[name] = race.variants[name]
        except Exception as exc:  # noqa: BLE001
            _failed(shape_rows[name], exc, oom_at, shape)
    blocking = [n for n in ready if shape_rows[n].backend in JAX_BACKENDS]
    timings = time_in_rounds(timer, ready, input_sets, race.rounds, blocking=blocking, set_bytes=set_bytes,
                             shuffle=race.shuffle)
    samples = {}
    for name, timing in timings.items():
        try:
            if isinstance(timing, Exception):
                raise timing
            samples[name] = _record(race, name, timing, input_sets, shape_rows[name], retries0[name])
            _host_figures(timer, race.variants[name], input_sets, shape_rows[name])
        except Exception as exc:  # noqa: BLE001
            _failed(shape_rows[name], exc, oom_at, shape)
    return samples


def _release() -> None:
    """Give cached device memory back between shapes, so one variant's pool does not starve the next."""
    import gc

    gc.collect()
    if has_gpu():
        import torch

        torch.cuda.synchronize()
        torch.cuda.empty_cache()
