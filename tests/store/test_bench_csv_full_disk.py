"""``write_rows`` on a full disk: one line naming the CSV, and every row it held still there (the write goes to a
temporary that replaces the CSV only once whole)."""

from __future__ import annotations

import errno
import os

import pytest
from fulldisk import files, fill, small_disk

from labmagic import paths
from labmagic.errors import LabError
from labmagic.store.bench_csv import read_rows, write_rows


def _row(variant: str) -> dict:
    return dict(chapter="01_vector_add", variant=variant, backend="cuda", shape="4096", dtype="float32", status="ok",
                ms_median=1.0)


def _refused(path, before: bytes) -> None:
    with pytest.raises(LabError) as err:
        write_rows(path, [_row("cuda_c")])
    assert str(err.value) == f"{path}: 1 row(s) not written (No space left on device); the CSV is as it was"
    assert files(path.parent) == {path.name: before, f"{path.name}.lock": b""}  # no temporary left either
    assert [r["variant"] for r in read_rows(path)] == ["torch", "cuda_a"]


def test_on_a_full_tmpfs(tmp_path):
    with small_disk(tmp_path / "disk", "64k") as disk:
        path = disk / "bench" / "01_vector_add.csv"
        write_rows(path, [_row("torch"), _row("cuda_a")])
        before = path.read_bytes()
        fill(disk)
        _refused(path, before)


def test_with_the_write_failing_as_on_a_full_disk(tmp_path, monkeypatch):
    """The same where no tmpfs can be mounted: the flush to disk fails as a full disk's does."""
    path = tmp_path / "bench" / "01_vector_add.csv"
    write_rows(path, [_row("torch"), _row("cuda_a")])
    before = path.read_bytes()

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(paths.os, "fsync", full)
    _refused(path, before)
