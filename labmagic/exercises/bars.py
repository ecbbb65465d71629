"""An exercise's speed bar in milliseconds on a GPU, and the physical floor no honest kernel goes below.

The bar is what the statement promises, predicted from the roofline and the chapter's measurements on that GPU:

- ``against="copy"``: the exercise's bytes at ``fraction`` of the device-to-device copy that ``labmagic calibrate``
  measured (``results/<gpu>/ceilings.json``): a memory-bound kernel is judged against the best a copy reaches.
- ``against=<variant>``: ``fraction`` of the speed of that rung of the chapter's race, its median in
  ``results/<gpu>/bench/<chapter>.csv``: a compute-bound kernel is judged against the rung it rebuilds.

The floor is the datasheet's: the exercise's bytes at the spec bandwidth, its FLOPs at the spec peak of its dtype.
A call timed below it did not do the work (a result kept from an earlier call).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from ..benchmark.roofline import find_spec, load_ceilings
from ..errors import LabError
from ..paths import results_dir
from ..store.bench_csv import read_rows
from ..store.fingerprint import read_notebook, write_notebook
from ..store.schema import OK, shape_str
from . import registry
from .spec import Exercise

#: A statement's bar sentence: "**Bar:** at <shape>: <ms> ms or less, ... (<what it is against>)." -- the text
#: :func:`bar_value` writes, up to its closing parenthesis (the sentence's full stop stays).
_BAR_SENTENCE = re.compile(r"(\*\*Bar:\*\* )at [^\n]*?\([^()\n]*\)(?=\.)")


@dataclass(frozen=True)
class BarValue:
    """The bar on one GPU: its time, the time it is a fraction of, and the sentence that states it."""

    ms: float
    reference_ms: float
    text: str


def bar_value(exercise: Exercise, slug: str) -> BarValue | None:
    """The bar on GPU ``slug`` (``nvidia-h200``), or None when that GPU has no ceilings or no row of the rung."""
    bar = exercise.bar
    if bar.against == "copy":
        ceilings = load_ceilings(slug)
        if ceilings is None:
            return None
        nbytes = float(exercise.nbytes(*bar.shape))
        reference_ms = nbytes / (ceilings.copy_gbps * 1e9) * 1e3
        gpu = _gpu_name(slug)
        text = (f"at {exercise.label(bar.shape)}: {reference_ms / bar.fraction:.4g} ms or less, "
                f"{bar.fraction:.0%} of the {ceilings.copy_gbps:.0f} GB/s copy measured on the {gpu} "
                f"({nbytes / 1e9:.4g} GB moved)")
        return BarValue(reference_ms / bar.fraction, reference_ms, text)
    row = rung_row(exercise, slug)
    if row is None:
        return None
    reference_ms = float(row["ms_median"])
    text = (f"at {exercise.label(bar.shape)}: {reference_ms / bar.fraction:.4g} ms or less, {bar.fraction:.0%} of the "
            f"speed of the chapter's `{bar.against}` ({reference_ms:.4g} ms on the {row.get('gpu') or slug})")
    return BarValue(reference_ms / bar.fraction, reference_ms, text)


def rung_row(exercise: Exercise, slug: str) -> dict | None:
    """The chapter's measured row the bar refers to (status ok), or None."""
    bar = exercise.bar
    key = bar.rung_shape or shape_str(bar.shape)
    path = results_dir(slug) / "bench" / f"{exercise.chapter}.csv"
    for row in read_rows(path):
        if (row.get("variant") == bar.against and row.get("shape") == key and row.get("status") == OK
                and (not bar.dtype or row.get("dtype") == bar.dtype) and row.get("ms_median")):
            return row
    return None


def floor_ms(exercise: Exercise, slug: str) -> float | None:
    """The datasheet floor at the bar's shape on GPU ``slug``: bytes at the spec bandwidth, FLOPs at the spec peak."""
    spec = find_spec(slug)
    if spec is None:
        return None
    shape = exercise.bar.shape
    times = [float(exercise.nbytes(*shape)) / (spec.bandwidth_gbps * 1e9) * 1e3]
    if exercise.flops is not None and exercise.bar.dtype:
        peak = spec.peak_tflops(exercise.bar.dtype)
        if peak:
            times.append(float(exercise.flops(*shape)) / (peak * 1e12) * 1e3)
    floor = max(times)
    return floor if math.isfinite(floor) and floor > 0 else None


def _gpu_name(slug: str) -> str:
    spec = find_spec(slug)
    return spec.name.split(" (")[0] if spec else slug


def restate_statements(slug: str = "nvidia-h200") -> list[Path]:
    """Rewrite the bar sentence of every exercise statement in ``book/exercises/`` with :func:`bar_value` on GPU
    ``slug`` (run after a chapter's rows land, as ``labmagic results --readme`` is); return the notebooks changed.
    A statement is the markdown cell whose first line names the exercise; one with no bar sentence, or an exercise
    with no measured bar there, is a one-line LabError."""
    changed = []
    for chapter in registry.chapters():
        path = registry.notebook_path(chapter)
        nb, edited = read_notebook(path), False
        for exercise in registry.in_chapter(chapter):
            bar = bar_value(exercise, slug)
            if bar is None:
                raise LabError(f"{exercise.name}: no measured bar on {slug} (no ceilings, or no ok row of "
                               f"`{exercise.bar.against}` at its shape)")
            cell = next((c for c in nb["cells"] if c.get("cell_type") == "markdown"
                         and f"`{exercise.name}`" in "".join(c["source"]).split("\n", 1)[0]), None)
            text = "".join(cell["source"]) if cell else ""
            new, count = _BAR_SENTENCE.subn(lambda m, bar=bar: m.group(1) + bar.text, text)
            if count != 1:
                raise LabError(f"{path}: the statement of {exercise.name} must have one '**Bar:** at ...' sentence, "
                               f"found {count}")
            if new != text:
                cell["source"], edited = new.splitlines(keepends=True), True
        if edited:
            write_notebook(path, nb)
            changed.append(path)
    return changed
