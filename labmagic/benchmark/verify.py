"""Correctness only: every variant of a race checked against its reference on the check shapes, nothing timed.

This is the first step of the loop test -> bench -> profile (``labmagic test CHAPTER``, ``%bench race --check``).
It runs exactly the check :func:`~labmagic.benchmark.runner.bench` runs before timing
(:func:`~labmagic.benchmark.runner.check_variant`: fresh random inputs, a poisoned allocator, the race's
tolerances) and returns a :class:`VerifyResult`, one row per variant, that prints itself as a pass/fail table.

A CUDA variant on a machine without a GPU is ``needs_gpu``: not checked, and not a failure. On CPU the torch,
Triton-interpreter and Pallas-interpret variants are checked for real.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import LabError
from ..runtime import gpu_name, has_gpu
from ..store.schema import ERROR, MISMATCH, SKIPPED, shape_str, shape_tuple
from .checks import tolerances
from .race import Race
from .runner import CheckFailed, check_variant

#: The status of a variant that matched the reference on every check shape.
PASS = "pass"
#: Statuses that make ``labmagic test`` exit non-zero.
FAILING = (MISMATCH, ERROR)


@dataclass
class VerifyRow:
    """One variant's verdict: ``err_over_tol`` its worst error as a fraction of the tolerance (pass at or below 1),
    ``shape`` the check shape it failed at ("" when none is to blame)."""

    variant: str
    backend: str
    status: str
    err_over_tol: float | None = None
    shape: str = ""
    reason: str = ""


@dataclass
class VerifyResult:
    """The outcome of :func:`verify`; ``failed`` is True when any variant mismatched or raised. ``rtol`` and
    ``atol`` are the tolerances every row was held to."""

    chapter: str
    dtype: str
    shapes: list[str]
    rows: list[VerifyRow]
    device: str
    notes: list[str] = field(default_factory=list)
    rtol: float | None = None
    atol: float | None = None

    @property
    def failed(self) -> bool:
        return any(r.status in FAILING for r in self.rows)

    @property
    def checked(self) -> bool:
        """Whether any variant was actually compared with the reference (not all ``needs_gpu``/``skipped``)."""
        return any(r.status in (PASS, *FAILING) for r in self.rows)

    def row(self, variant: str) -> VerifyRow:
        for r in self.rows:
            if r.variant == variant:
                return r
        raise KeyError(variant)

    def _repr_html_(self) -> str:
        from ..display.verify_table import render_html

        return render_html(self)

    def __repr__(self) -> str:
        from ..display.verify_table import render_text

        return render_text(self)


def verify(race: Race, variants: Sequence[str] | None = None,
           shapes: Sequence[tuple[int, ...]] | None = None) -> VerifyResult:
    """Check ``variants`` (default: all, the reference included) on ``shapes`` (default: the race's check shapes)."""
    names = list(race.variants) if variants is None else list(dict.fromkeys(variants))
    unknown = [n for n in names if n not in race.variants]
    if unknown:
        raise LabError(f"unknown variants: {', '.join(unknown)} (race has {', '.join(race.variants)})")
    shapes = [shape_tuple(s) for s in (race.check_shapes if shapes is None else shapes)]
    rows = [_verify_one(race, name, shapes) for name in names]
    notes = []
    if not shapes:
        notes.append(f"race {race.chapter!r} has no check_shapes: nothing was checked (give Race(check_shapes=[...]))")
    rtol, atol = race.tolerances(shapes[0]) if shapes else tolerances(race.dtype, race.rtol, None)
    if callable(race.atol) and shapes:  # each shape held to its own: the loosest is the one stated
        atol = max(race.tolerances(s)[1] for s in shapes)
        notes.append("atol grows with the shape: " + ", ".join(f"{shape_str(s)}: {race.tolerances(s)[1]:g}"
                                                                for s in shapes))
    return VerifyResult(race.chapter, str(race.dtype), [shape_str(s) for s in shapes], rows,
                        gpu_name() if has_gpu() else "no GPU", notes, rtol, atol)


def _verify_one(race: Race, name: str, shapes: list[tuple[int, ...]]) -> VerifyRow:
    backend = race.backend(name)
    if not shapes:
        return VerifyRow(name, backend, SKIPPED, reason="no check shapes")
    try:
        worst = check_variant(race, name, shapes)
    except CheckFailed as failure:
        where = shape_str(failure.shape) if failure.shape is not None else ""
        return VerifyRow(name, backend, failure.status, failure.err_over_tol, where, str(failure))
    return VerifyRow(name, backend, PASS, worst)
