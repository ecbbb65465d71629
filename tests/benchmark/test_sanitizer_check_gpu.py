"""``%bench --sanitize`` on a GPU: a kernel that writes one element past its output (and reads one past its input)
passes the plain check, because the stray bytes land in the caching allocator's slack; under memcheck, in a child
that replays the chapter from disk with un-pooled allocations, it is an ``error`` row naming kernel and cell line,
and it is not timed."""

from __future__ import annotations

import pytest
from planted_oob import CUDA_CELL, PLANTED, PLANTED_LINE, python_cell, write_chapter

from labmagic.store.schema import ERROR, OK

pytestmark = pytest.mark.gpu

#: Odd: in the parent's pool the stray element lands in the block's rounding slack (see planted_oob).
SHAPE = 1_000_003

@pytest.fixture
def chapter_shell(shell, tmp_path, monkeypatch):
    """The chapter on disk (book/96_memcheck.ipynb under a scratch root, for the child) and run in the shell."""
    monkeypatch.setenv("LABMAGIC_ROOT", str(tmp_path))
    (tmp_path / "book").mkdir()
    write_chapter(tmp_path / "book" / "96_memcheck.ipynb", "96_memcheck", SHAPE)
    shell.run(CUDA_CELL)
    shell.run(python_cell("96_memcheck", SHAPE))
    return shell


def _rows(result):
    return {row.variant: row for row in result.rows}


def test_the_plain_check_passes_the_off_by_one_and_memcheck_catches_it(chapter_shell):
    plain = _rows(chapter_shell.run("%bench race --no-plot --no-save"))
    assert plain["cuda_oob"].status == OK and plain["cuda_oob"].ms_median  # the bug this flag exists for

    rows = _rows(chapter_shell.run("%bench race --no-plot --no-save --sanitize"))
    past = rows["cuda_oob"]
    assert past.status == ERROR and past.ms_median is None  # never timed
    assert past.error.startswith("memcheck: Invalid __global__ ")
    assert f"in vecadd_oob at cell line {PLANTED_LINE}: {PLANTED.strip()}" in past.error
    assert rows["cuda_ok"].status == OK and rows["cuda_ok"].ms_median  # a clean kernel is timed as before
    assert rows["torch"].status == OK


def test_a_race_that_is_no_chapter_on_disk_is_timed_with_a_note(chapter_shell, tmp_path):
    (tmp_path / "book" / "96_memcheck.ipynb").unlink()
    result = chapter_shell.run("%bench race --no-plot --no-save --sanitize")
    assert _rows(result)["cuda_oob"].status == OK
    assert any(n.startswith("sanitize: race '96_memcheck' is not a chapter notebook") for n in result.notes)
