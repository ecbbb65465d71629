"""A chapter's own correctness table: variants checked one case at a time against the chapter's exact reference.

``%bench race --check`` holds every variant of a race to the race's reference variant on its check shapes. Some
checks do not fit a race: an fp64 product as the reference, a tile configuration that no race times (chapter 06's
every split-K configuration on four decode shapes), another dtype on other shapes. A chapter lists those as cases,
``(name, variant, shape, dtype)``, writes its ``check(variant, *shape, seed=, dtype=)`` (which raises
``AssertionError`` on a mismatch and returns the worst error otherwise), and :func:`check_cases` runs them all:

- a row per case, ``name  shape  status``: ``ok, max abs err 3.1e-03``, ``MISMATCH: <the assertion's first line
  that says what differed>``, ``needs a GPU: skipped`` (a :class:`~labmagic.errors.NoGPUError`), ``skipped: why``
  (a DSL that cannot run here, :class:`~labmagic.dsl.DSLUnavailable`);
- an input the variant refuses by design (:class:`~labmagic.errors.UnsupportedInput`, a peer library's limit) is
  ``skipped: why``; any other exception is ``ERROR: <type>: <first line>``, a failure like a mismatch;
- every case runs, so one failure does not hide the next; then, if any failed, one ``AssertionError`` names them all
  (the cell fails, as a sweep must see), chained to the first exception a case raised; the cases whose variant is
  named in ``tolerate`` (its name's first word: a peer library's) stay in the table without failing the cell;
- ``show(index, name)`` thins out passing rows of long families (failures are always shown); case ``i`` gets
  ``seed(i)``, so a failure reruns alone with the same inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..dsl import DSLUnavailable
from ..errors import NoGPUError, UnsupportedInput, describe

#: A case: (name shown, variant, shape, dtype).
Case = tuple[str, Callable, Sequence[int], Any]


@dataclass(frozen=True)
class CaseRow:
    """One case's verdict: ``status`` is ``ok``, ``mismatch``, ``error``, ``needs_gpu`` or ``skipped``."""

    name: str
    shape: str
    dtype: str
    status: str
    text: str


def _error_text(err) -> str:
    errs = err if isinstance(err, (tuple, list)) else (err,)
    return ", ".join(f"{e:.1e}" for e in errs)


def _mismatch_text(exc: AssertionError) -> str:
    """The line of torch.testing's message that says what differed (its first is only 'Tensor-likes are not close!')."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[1] if len(lines) > 1 else (lines[0] if lines else type(exc).__name__)


def check_cases(cases: Iterable[Case], check: Callable[..., Any], *,
                seed: Callable[[int], int] = lambda i: 1000 * i + 7,
                show: Callable[[int, str], bool] | None = None, note: str = "",
                out: Callable[[str], None] = print, tolerate: Iterable[str] = ()) -> list[CaseRow]:
    """Run ``check(variant, *shape, seed=seed(i), dtype=dtype)`` for every case, print a row each (passing rows
    only where ``show(i, name)``), then a summary line (``note`` appended); raise ``AssertionError`` naming every
    failure once all have run, except those of the variants in ``tolerate``. Returns the rows."""
    rows, failures, cause = [], [], None
    tolerate = set(tolerate)
    cases = list(cases)
    width = max((len(c[0]) for c in cases), default=0)
    shape_texts = ["x".join(map(str, c[2])) for c in cases]  # str, not shape_str: 07's shapes end in a causal flag
    swidth = max([14, *map(len, shape_texts)])
    for i, ((name, fn, shape, dtype), shape_text) in enumerate(zip(cases, shape_texts, strict=True)):
        dtype_text = str(dtype).removeprefix("torch.")
        error = None
        try:
            status, text = "ok", f"ok, max abs err {_error_text(check(fn, *shape, seed=seed(i), dtype=dtype))}"
        except NoGPUError:
            status, text = "needs_gpu", "needs a GPU: skipped"
        except DSLUnavailable as exc:
            status, text = "skipped", f"skipped: {str(exc).split(': ', 1)[-1]}"
        except UnsupportedInput as exc:
            status, text = "skipped", f"skipped: {exc}"
        except AssertionError as exc:
            status, text = "mismatch", f"MISMATCH: {_mismatch_text(exc)}"
        except Exception as exc:  # noqa: BLE001 - a crashing variant is a row, not the end of the table
            status, text, error = "error", f"ERROR: {describe(exc)}", exc
        if status in ("mismatch", "error") and name.split()[0] not in tolerate:
            failures.append((name, shape_text, dtype_text))
            cause = cause or error  # the first exception of a failure that counts, for the traceback
        rows.append(CaseRow(name, shape_text, dtype_text, status, text))
        if status != "ok" or show is None or show(i, name):
            out(f"{name:<{width}} {shape_text:<{swidth}} {text}")
    failed = sum(row.status in ("mismatch", "error") for row in rows)
    out(f"{len(rows)} checks, {failed} mismatches" + (f" ({note})" if note else "")
        + (f", {failed - len(failures)} of them a peer's" if failed > len(failures) else ""))
    if failures:
        raise AssertionError(f"variants disagree with the reference: {failures}") from cause
    return rows
