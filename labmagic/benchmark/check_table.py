"""A chapter's own correctness pass: every variant on every check shape (and dtype), under the chapter's check.

``%bench race --check`` compares a variant's output with the reference's under one tolerance. Some checks need more
than that: chapter 08's quantizers are held to planted rows that ``%bench`` refuses (inf and NaN, whose scale is NaN),
with the scale and the codes compared separately, and its W8A8 linear is compared with a float64 evaluation of the
quantised math. There the chapter writes the check, ``check(fn, *shape[, dtype], seed=...)``, which raises
``AssertionError`` saying what differs and may return a note (an error it measured), and :func:`check_variants`
runs it over the variants, dtypes and shapes in place of a hand-written loop:

- a variant that cannot run here (:class:`~labmagic.NoGPUError`: a CUDA kernel without a GPU) is ``needs a GPU:
  skipped``; one whose library is not installed (:class:`~labmagic.DSLUnavailable`, as a DSL's or a peer's) is
  ``skipped`` with the reason, as their rows read in a race;
- a failed check is ``MISMATCH`` with the assertion's first line, and kept in :attr:`CheckTable.failures`; any other
  exception (a variant that crashes, a peer library that rejects an input, a bug in the check) is ``ERROR`` with its
  type and first line, also a failure, and the exception is kept so that :meth:`~CheckTable.require` chains it (its
  traceback is not lost): one broken variant does not stop the others' checks, nor a sweep's races;
- :meth:`CheckTable.require` raises when a variant disagreed (with ``gpu_only=True``, only without a GPU: on a GPU a
  mismatch stays in the table, and ``%bench`` refuses to time that variant; ``tolerate`` names variants whose
  failures stay in the table without raising, as a peer library's, which its race rows then show).

The table prints one line per (variant, dtype, shape), or with ``summary=True`` one line per (variant, dtype) with
the distinct outcomes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from ..dsl import DSLUnavailable
from ..errors import LabError, NoGPUError, UnsupportedInput, describe
from ..store.schema import shape_str

SKIPPED_NO_GPU = "needs a GPU: skipped"


@dataclass(frozen=True)
class CheckLine:
    """One variant at one shape (and dtype): ``ok`` True (passed), False (failed) or None (skipped)."""

    variant: str
    dtype: str
    shape: tuple
    ok: bool | None
    status: str
    error: BaseException | None = field(default=None, repr=False, compare=False)


@dataclass
class CheckTable:
    """The outcome of :func:`check_variants`; prints as a plain table."""

    lines: list[CheckLine] = field(default_factory=list)
    summary: bool = False

    @property
    def failures(self) -> list[CheckLine]:
        return [line for line in self.lines if line.ok is False]

    def require(self, gpu_only: bool = False, tolerate: Iterable[str] = ()) -> None:
        """Raise :class:`AssertionError` naming each disagreeing (variant, dtype, shape), chained to the first
        exception a check raised (not an assertion); with ``gpu_only``, only on a machine without a GPU (on a GPU a
        mismatch stays in the table and in the race, where it is never timed). Failures of the variants named in
        ``tolerate`` (a peer library's) never raise: they stay in the table, and the race's check marks their rows.
        Returns nothing, so that a cell ending in ``table.require()`` does not show the table it printed again."""
        from ..runtime import has_gpu

        tolerate = set(tolerate)
        failures = [f for f in self.failures if f.variant not in tolerate]
        if failures and not (gpu_only and has_gpu()):
            named = ", ".join(f"{f.variant} {f.dtype} {shape_str(f.shape)}".replace("  ", " ") for f in failures)
            cause = next((f.error for f in failures if f.error is not None), None)
            raise AssertionError(f"variants disagree with the reference: {named}") from cause

    def __repr__(self) -> str:
        if not self.lines:
            return "(no checks)"
        if self.summary:
            groups: dict[tuple[str, str], list[str]] = {}
            for line in self.lines:
                groups.setdefault((line.variant, line.dtype), []).append(line.status)
            width = max(len(v) for v, _ in groups)
            dwidth = max(len(d) for _, d in groups)
            return "\n".join(f"{v:<{width}} {d:<{dwidth}} {len(s)} shapes: " + "; ".join(sorted(set(s)))
                             for (v, d), s in groups.items())
        width = max(len(line.variant) for line in self.lines)
        dwidth = max(len(line.dtype) for line in self.lines)
        swidth = max(len(shape_str(line.shape)) for line in self.lines)
        return "\n".join(f"{line.variant:<{width}} " + (f"{line.dtype:<{dwidth}} " if dwidth else "")
                         + f"{shape_str(line.shape):<{swidth}} {line.status}" for line in self.lines)

    def _repr_pretty_(self, p, cycle) -> None:  # IPython prints the plain table
        p.text(repr(self))


def _dtype_name(dtype) -> str:
    return "" if dtype is None else str(dtype).removeprefix("torch.")


def check_variants(check: Callable, variants: Mapping[str, Callable], shapes: Iterable, dtypes: Iterable = (None,),
                   seed: Callable[[int, int], int] | None = None, passed: Callable[[object], str] | None = None,
                   summary: bool = False) -> CheckTable:
    """Run ``check(fn, *shape[, dtype], seed=seed(i, n))`` for every variant, dtype and shape, in that order.

    ``dtypes``: ``(None,)`` (the default) passes none. ``seed(i, n)``: the seed for the ``i``-th shape when ``n``
    checks have run before (default: ``i``). ``passed(value)``: the status of a passing check from what it returned
    (default ``ok``). Returns the :class:`CheckTable`; call its :meth:`~CheckTable.require` to fail on a mismatch.
    """
    shapes = [tuple(s) for s in shapes]
    dtypes = list(dtypes)
    if not shapes or not dtypes:
        raise LabError("check_variants: no shapes or no dtypes to check")
    table = CheckTable(summary=summary)
    for name, fn in variants.items():
        for dtype in dtypes:
            for i, shape in enumerate(shapes):
                s = seed(i, len(table.lines)) if seed else i
                error = None
                args = (*shape,) if dtype is None else (*shape, dtype)
                try:
                    value = check(fn, *args, seed=s)
                except NoGPUError:
                    ok, status = None, SKIPPED_NO_GPU
                except (DSLUnavailable, UnsupportedInput) as exc:  # not here, or not this input: the next shape
                    ok, status = None, f"skipped: {exc}"
                except AssertionError as exc:
                    text = str(exc).strip().splitlines()
                    ok, status = False, "MISMATCH: " + (text[0] if text else "the check failed")
                except Exception as exc:  # noqa: BLE001 - a crashing variant is a line, not the end of the table
                    ok, status, error = False, f"ERROR: {describe(exc)}", exc
                else:
                    ok, status = True, passed(value) if passed else "ok"
                table.lines.append(CheckLine(name, _dtype_name(dtype), shape, ok, status, error))
    return table
