"""What a Dask worker sends back is stored on the driver only whole: a notebook its record vouches for that is not a
notebook is refused, and a full disk under ``results/<kind>/`` leaves the previous notebook, log, record, rows and
plots as they were."""

from __future__ import annotations

import json

import nbformat
import pytest
from fulldisk import files, fill, small_disk

from labmagic.errors import LabError
from labmagic.execute.chapter_result import ChapterResult, publish
from labmagic.store.bench_csv import bench_csv_path
from labmagic.store.manifest import content_hash


def _result(run: str, notebook: bytes | None = None, output: str = "") -> ChapterResult:
    if notebook is None:
        cell = nbformat.v4.new_code_cell(f"print({run!r})", outputs=[nbformat.v4.new_output("stream", text=output)])
        notebook = nbformat.writes(nbformat.v4.new_notebook(cells=[cell])).encode()
    record = {"chapter": "01_alpha", "device": "cpu", "status": "passed", "size": "quick", "input_hash": run,
              "notebook_hash": content_hash(notebook)}
    rows = [{"chapter": "01_alpha", "variant": "torch", "backend": "torch", "shape": "64", "dtype": "float32",
             "status": "ok", "ms_median": 0.5, "source_hash": run}]
    return ChapterResult("01_alpha", "cpu", "passed", record=record, notebook=notebook, log=f"{run} log\n".encode(),
                         rows=rows, files={"bench/01_alpha.png": f"{run} plot".encode()}, worker="tcp://w:1")


def _stored(root) -> dict[str, bytes]:
    cpu = root / "results" / "cpu"
    return {**files(cpu / "notebooks"), **files(cpu / "bench")}


def test_a_notebook_cut_short_is_refused_though_its_hash_matches(tiny_repo):
    publish(_result("first"))
    before = _stored(tiny_repo)
    cut = nbformat.writes(nbformat.v4.new_notebook()).encode()[:40]
    with pytest.raises(LabError, match=r"^01_alpha on cpu from tcp://w:1: the notebook that came back is not a "
                                       r"notebook \(not JSON \("):
        publish(_result("second", notebook=cut))
    assert _stored(tiny_repo) == before


def test_a_full_disk_publishes_nothing(tiny_repo):
    with small_disk(tiny_repo / "results" / "cpu", "1m") as cpu:
        executed = publish(_result("first"))
        assert json.loads((cpu / "notebooks" / "01_alpha.json").read_text())["input_hash"] == "first"
        before = _stored(tiny_repo)
        fill(cpu, leave=32 * 1024)  # room for the rows and the plot, not for the notebook
        with pytest.raises(LabError, match=r"^01_alpha on cpu: could not store notebooks/01_alpha.ipynb \(No space "
                                           r"left on device\)$"):
            publish(_result("second", output="x" * 300_000))
        assert _stored(tiny_repo) == before
        assert executed == cpu / "notebooks" / "01_alpha.ipynb" and bench_csv_path("01_alpha", "cpu").exists()
