"""The results fingerprint follows includes (issue #48): editing a header makes stale exactly the rows of the
chapters whose CUDA includes it, directly, through another header, through a cell's own ``-I`` folder or from a
kernel file."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from sitebuild import write_chapter

from labmagic.store import staleness
from labmagic.store.fingerprint import chapter_hash

CHAPTERS = {
    "01_alpha": '%%cuda_kernel\n#include <lab/outer.cuh>\nextern "C" __global__ void a(float* x) {}\n',
    "02_beta": '%%cuda_kernel --as beta -- -I own\n#include "mine.cuh"\nextern "C" __global__ void b(float* x) {}\n',
    "03_gamma": "import labmagic\nsource = open('03_gamma/k.cu').read()\n",
    "04_delta": 'print("no CUDA here")\n',
}


@pytest.fixture
def book(tmp_path, monkeypatch):
    monkeypatch.delenv("LABMAGIC_INCLUDE_DIR", raising=False)
    root = tmp_path / "repo"
    book = root / "book"
    (book / "include" / "lab").mkdir(parents=True)
    (book / "include" / "lab" / "outer.cuh").write_text('#pragma once\n#include "inner.cuh"\n')
    (book / "include" / "lab" / "inner.cuh").write_text("#define INNER 1\n")
    (book / "include" / "lab" / "other.cuh").write_text("#define OTHER 1\n")
    (book / "own").mkdir()
    (book / "own" / "mine.cuh").write_text("#define MINE 1\n")
    (book / "03_gamma").mkdir()
    (book / "03_gamma" / "k.cu").write_text('#include <lab/other.cuh>\nextern "C" __global__ void g() {}\n')
    for chapter, cell in CHAPTERS.items():
        write_chapter(book / f"{chapter}.ipynb", cell)
    return root


def _hashes(root) -> dict[str, str]:
    return {c: chapter_hash(root / "book" / f"{c}.ipynb") for c in CHAPTERS}


@pytest.mark.parametrize(("header", "changed"), [
    ("include/lab/inner.cuh", {"01_alpha"}),  # included by outer.cuh, which 01's cell includes
    ("own/mine.cuh", {"02_beta"}),  # through the -I folder on 02's magic line
    ("include/lab/other.cuh", {"03_gamma"}),  # from 03's kernel file
])
def test_an_edited_header_changes_the_hash_of_exactly_the_chapters_that_include_it(book, header, changed):
    before = _hashes(book)
    with open(book / "book" / header, "a") as handle:
        handle.write("// edited\n")
    after = _hashes(book)
    assert {c for c in CHAPTERS if before[c] != after[c]} == changed


def test_an_edited_header_marks_stale_exactly_the_rows_of_the_chapters_that_include_it(book):
    slug = "nvidia-h200"
    for chapter, digest in _hashes(book).items():
        record = book / "results" / slug / "notebooks" / f"{chapter}.json"
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({"status": "passed", "input_hash": digest, "started": "2026-12-01T10:00:00"}))
    rows = pd.DataFrame([dict(gpu_slug=slug, chapter=c, variant=v, source_hash="")
                         for c in CHAPTERS for v in ("ref", "fast")])
    assert (staleness.stale_reasons(rows, book) == "").all()
    (book / "book" / "include" / "lab" / "inner.cuh").write_text("#define INNER 2\n")
    reasons = staleness.stale_reasons(rows, book)
    assert set(rows[reasons != ""]["chapter"]) == {"01_alpha"}
    assert set(reasons[reasons != ""]) == {"chapter changed since the sweep of 2026-12-01"}
