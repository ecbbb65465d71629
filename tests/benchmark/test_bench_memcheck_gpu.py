"""``%bench --sanitize`` on a GPU: a kernel that writes one element past its output (and reads one past its input)
passes the plain check, because the stray bytes land in the caching allocator's slack; under memcheck, in a child
that replays the chapter from disk with un-pooled allocations, it is an ``error`` row naming kernel and cell line,
and it is not timed."""

from __future__ import annotations

import json

import pytest

from labmagic.store.schema import ERROR, OK

pytestmark = pytest.mark.gpu

CUDA_CELL = """\
%%cuda_kernel
extern "C" __global__ void vecadd_fine(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" __global__ void vecadd_past(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= n) c[i] = a[i] + b[i];  // PLANTED: thread n reads a[n] and writes c[n]
}"""

PYTHON_CELL = """\
import torch, triton, labmagic.benchmark

def run(kernel):
    def call(a, b):
        c = torch.empty_like(a)
        kernel(a, b, c, a.numel(), grid=triton.cdiv(a.numel() + 1, 256), block=256)
        return c
    return call

race = labmagic.benchmark.Race(
    chapter="96_memcheck", ref="torch",
    variants={"torch": torch.add, "cuda_fine": run(vecadd_fine), "cuda_past": run(vecadd_past)},
    make_inputs=lambda n: (torch.randn(n, device="cuda"), torch.randn(n, device="cuda")),
    shapes=[(1_000_003,)], check_shapes=[(1024,)], nbytes=lambda n: 12 * n, flops=lambda n: n)"""

# check_shapes=(1024,): 4096-byte tensors, so in the child (one cudaMalloc each) c[n] is past the allocation memcheck
# knows. The timed shape is odd, so in the parent's pool the stray element lands in the block's rounding slack.

PLANTED = "  if (i <= n) c[i] = a[i] + b[i];  // PLANTED: thread n reads a[n] and writes c[n]"
PLANTED_LINE = 1 + CUDA_CELL.splitlines().index(PLANTED)


@pytest.fixture
def chapter_shell(shell, tmp_path, monkeypatch):
    """The chapter on disk (book/96_memcheck.ipynb under a scratch root, for the child) and run in the shell."""
    monkeypatch.setenv("LABMAGIC_ROOT", str(tmp_path))
    cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": s}
             for s in ("%load_ext labmagic", CUDA_CELL, PYTHON_CELL, "%bench race")]
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "96_memcheck.ipynb").write_text(
        json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    shell.run(CUDA_CELL)
    shell.run(PYTHON_CELL)
    return shell


def _rows(result):
    return {row.variant: row for row in result.rows}


def test_the_plain_check_passes_the_off_by_one_and_memcheck_catches_it(chapter_shell):
    plain = _rows(chapter_shell.run("%bench race --no-plot --no-save"))
    assert plain["cuda_past"].status == OK and plain["cuda_past"].ms_median  # the bug this flag exists for

    rows = _rows(chapter_shell.run("%bench race --no-plot --no-save --sanitize"))
    past = rows["cuda_past"]
    assert past.status == ERROR and past.ms_median is None  # never timed
    assert past.error.startswith("memcheck: Invalid __global__ ")
    assert f"in vecadd_past at cell line {PLANTED_LINE}: {PLANTED.strip()}" in past.error
    assert rows["cuda_fine"].status == OK and rows["cuda_fine"].ms_median  # a clean kernel is timed as before
    assert rows["torch"].status == OK


def test_a_race_that_is_no_chapter_on_disk_is_timed_with_a_note(chapter_shell, tmp_path):
    (tmp_path / "book" / "96_memcheck.ipynb").unlink()
    result = chapter_shell.run("%bench race --no-plot --no-save --sanitize")
    assert _rows(result)["cuda_past"].status == OK
    assert any(n.startswith("sanitize: race '96_memcheck' is not a chapter notebook") for n in result.notes)
