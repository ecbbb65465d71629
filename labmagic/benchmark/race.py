"""A race, as data: variants of one computation, the reference they are checked against, the shapes they are
timed on (:class:`Race`); and what a run of it gave (:class:`BenchResult`), which renders itself
(:mod:`labmagic.display.race_table`), converts to a DataFrame, and saves its rows (:mod:`labmagic.store.bench_csv`).

:func:`labmagic.benchmark.runner.bench` runs a race; see there for the order of work.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..dsl import DSLS
from ..errors import LabError
from ..paths import check_chapter_name, check_variant_name
from ..store import bench_csv
from ..store.schema import Row, row_from_cells, shape_str, shape_tuple
from . import roofline

#: Variant-name prefixes and the backend they imply (``cuda_float4`` -> ``cuda``), the kernel DSLs' among them
#: (``helion_online`` -> ``helion``).
BACKEND_PREFIXES = ("torch", "cuda", "cupy", "triton", "pallas", "jax", "cublas", "cudnn", "sdpa", *DSLS)

#: The timers a race or ``%bench --timer`` can name: ``events``, CUDA events around each call (graphs for calls under
#: 20 us); ``graph``, every call that can be captured timed in a CUDA graph (:class:`labmagic.timing.CudaTimer`).
TIMERS = ("events", "graph")

#: Backends whose work runs on JAX's streams (timed on the device clock from CUPTI records, ``cupti``, else with
#: ``cuda_event_blocking``).
JAX_BACKENDS = ("jax", "pallas")


def callable_identity(fn):
    """Equal for the same callable and for partials that bind the same function to the same arguments (chapter 07
    builds one ``partial(f, causal=True)`` per race: they are one variant)."""
    if isinstance(fn, functools.partial):
        key = ("partial", callable_identity(fn.func), fn.args, tuple(sorted(fn.keywords.items())))
        try:
            hash(key)
            return key
        except TypeError:  # unhashable or unorderable arguments: only the object itself
            return id(fn)
    return id(fn)


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
    atol: float | Callable[..., float] | None = None
    backends: Mapping[str, str] | None = None
    rounds: int = 1
    shuffle: int | None = None
    rep_ms: float | None = None
    timer: str | None = None

    def __post_init__(self):
        check_chapter_name(self.chapter)
        if not isinstance(self.rounds, int) or self.rounds < 1:
            raise LabError(f"race {self.chapter!r}: rounds must be a positive integer, got {self.rounds!r}")
        if self.shuffle is not None and (not isinstance(self.shuffle, int) or isinstance(self.shuffle, bool)):
            raise LabError(f"race {self.chapter!r}: shuffle is a seed (an int) or None, got {self.shuffle!r}")
        if self.timer is not None and self.timer not in TIMERS:
            raise LabError(f"race {self.chapter!r}: timer must be one of {', '.join(TIMERS)}, got {self.timer!r}")
        if self.atol is not None and not callable(self.atol) and not isinstance(self.atol, (int, float)):
            raise LabError(f"race {self.chapter!r}: atol is a number, a function of the shape's dimensions (like "
                           f"flops) or None, got {self.atol!r}")
        if self.rep_ms is not None and not self.rep_ms > 0:
            raise LabError(f"race {self.chapter!r}: rep_ms must be positive, got {self.rep_ms!r}")
        self.variants = dict(self.variants)
        for name in self.variants:
            check_variant_name(name)
        if self.ref not in self.variants:
            raise LabError(f"race {self.chapter!r}: ref {self.ref!r} is not one of the variants "
                           f"({', '.join(self.variants)})")
        self.shapes = [shape_tuple(s) for s in self.shapes]
        self.check_shapes = [shape_tuple(s) for s in self.check_shapes]
        unknown = set(self.limits) - set(self.variants)
        if unknown:
            raise LabError(f"race {self.chapter!r}: limits name unknown variants: {', '.join(sorted(unknown))}")

    def backend(self, name: str) -> str:
        """The variant's backend: declared in ``backends``, else its name's longest known prefix (``triton_v2`` ->
        triton, ``torchao_w8a8`` -> torchao, not torch)."""
        if self.backends and name in self.backends:
            return self.backends[name]
        for prefix in sorted(BACKEND_PREFIXES, key=len, reverse=True):
            if name.startswith(prefix):
                return prefix
        return "other"

    def tolerances(self, shape: Sequence[int] | str) -> tuple[float, float]:
        """(rtol, atol) at ``shape`` (a tuple or the CSV's key): ``atol`` may be a function of the shape's dimensions,
        like ``flops``, for an error that grows with one of them (chapter 10's one-accumulator FP8 sums, with
        sqrt(K)); unset, both default by dtype (:func:`labmagic.benchmark.checks.tolerances`)."""
        from .checks import tolerances

        dims = shape_tuple(shape.split("x") if isinstance(shape, str) else shape)
        atol = self.atol(*dims) if callable(self.atol) else self.atol
        return tolerances(self.dtype, self.rtol, atol)

    def over_limit(self, name: str, shape: tuple[int, ...]) -> bool:
        limit = self.limits.get(name)
        return limit is not None and math.prod(shape) > limit

    def work(self, shape: tuple[int, ...]) -> tuple[float | None, float | None]:
        """(flops, bytes) of one call at ``shape``."""
        flops = float(self.flops(*shape)) if self.flops else None
        nbytes = float(self.nbytes(*shape)) if self.nbytes else None
        return flops, nbytes


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
    nsight_check: Any = None  # %bench --nsight: the rows re-timed by Nsight Compute (benchmark.ncu_check)

    @property
    def shapes(self) -> list[str]:
        return list(dict.fromkeys(r.shape for r in self.rows))

    def row(self, variant: str, shape) -> Row:
        key = shape if isinstance(shape, str) else shape_str(shape_tuple(shape))
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
        from ..display import plots

        if not self.measured:
            raise LabError("nothing was measured (no GPU): predictions are not written to results/")
        if not self.rows:
            raise LabError(f"race {self.chapter!r}: no rows to save (no shapes were timed); nothing was written")
        self.csv_path = bench_csv.write_rows(csv_path or bench_csv.bench_csv_path(self.chapter), self.csv_rows())
        if png_path is not False:
            # The saved plots show every row of the CSV, not only the ones this run re-measured.
            whole = load_result(self.csv_path, self.spec, self.ceilings)
            if png_path:
                self.png_path = plots.save_png(whole, png_path)
            else:
                self.png_path = plots.save_chapter_pngs(whole)[self.rows[0].dtype]

    def _repr_html_(self) -> str:
        from ..display.race_table import render_html

        return render_html(self)

    def __repr__(self) -> str:
        from ..display.race_table import render_text

        return render_text(self)


def load_result(csv_path, spec=None, ceilings=None) -> BenchResult:
    """A chapter's CSV as a :class:`BenchResult` (for plots and tables drawn from ``results/``). The floor and its
    flag are judged again against the spec sheet of the GPU the rows name: a CSV's own ``below_floor`` may come from
    an earlier rule (or another machine) and is not trusted."""
    raw = bench_csv.read_rows(csv_path)
    rows = [row_from_cells(r) for r in raw]
    device = raw[0].get("gpu", "?") if raw else "?"
    timers = ", ".join(sorted({r.timer for r in rows if r.timer and r.timer != "-"})) or "-"
    spec = spec or roofline.find_spec(device)
    for row in rows:
        row.predicted_ms = roofline.floor_ms(spec, row.dtype, row.flops, row.nbytes)
        row.below_floor = roofline.below_floor(row.ms_median, row.predicted_ms)
    return BenchResult(rows[0].chapter if rows else "", rows, True, device, spec, ceilings, timer=timers,
                       csv_path=csv_path)
