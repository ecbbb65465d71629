"""Racing variants: the race model, correctness checks, timing on the GPU's clock, judgement against the
roofline, calibration of this GPU's ceilings, and the provenance stamped on every row.

``labmagic.bench(race)`` (:func:`labmagic.benchmark.runner.bench`) is the entry point
(:func:`labmagic.benchmark.verify.verify` its correctness pass alone); a chapter declares its :class:`Race` and
``%bench`` runs it.
"""

from __future__ import annotations

from ..store.schema import Row
from .race import BenchResult, Race, load_result
from .runner import auto_input_sets, bench, check_variant, judge, recheck
from .verify import VerifyResult, verify

__all__ = ["BenchResult", "Race", "Row", "auto_input_sets", "bench", "check_variant", "judge", "load_result",
           "recheck", "verify", "VerifyResult"]
