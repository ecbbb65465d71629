"""``%bench --nsight`` on a GPU with Nsight Compute: chapter 01's race (CUDA, Triton, torch and a Pallas/JAX variant)
at a launch-bound size and a memory-bound one. Every row the events timed gets an Nsight time from the one ncu child,
and every row of 50 us or more agrees with the events within 5%, the claim the book makes for its timer."""

from __future__ import annotations

import pytest

from labmagic.benchmark import ncu_check as nc
from labmagic.store.schema import OK

pytestmark = pytest.mark.gpu

SHAPES = ("2**20", "2**26")  # 4 MiB per operand, launch-bound; 256 MiB, about 200 us on an H200


@pytest.fixture
def chapter01(shell):
    """Chapter 01 replayed up to its ``%bench`` cell in the test shell (quick sizes), so ``race`` is the book's."""
    from labmagic.child.replay import load_chapter

    load_chapter("01", parameters={"size": "quick"}, shell=shell.ip)
    return shell


def test_every_timed_row_gets_an_nsight_time_and_long_rows_agree_within_5_percent(chapter01):
    result = chapter01.run(f"%bench race --no-save --no-plot --nsight --shapes {' '.join(SHAPES)}")
    check = result.nsight_check
    assert check is not None, result.notes  # a note here: no ncu, no counters permission, or the child failed
    timed = {(r.variant, r.shape) for r in result.rows if r.status == OK and r.ms_median}
    assert {"cuda_float4", "pallas"} <= {v for v, _ in timed}
    assert {(r.variant, r.shape) for r in check.rows} == timed
    assert not [r for r in check.rows if r.nsight_ms is None], repr(check)
    assert all(r.calls == check.iters and r.kernels >= 1 for r in check.rows), repr(check)
    long = [r for r in check.rows if r.judged]
    assert {r.shape for r in long} == {str(2**26)}, repr(check)  # the large size is judged, the small one short
    assert all(r.verdict == nc.AGREES for r in long), repr(check)
    assert check.worst_ratio is not None and abs(check.worst_ratio - 1) <= nc.AGREE_WITHIN
    assert "Nsight Compute cross-check" in repr(result) and check.csv_path is None  # --no-save: nothing written
