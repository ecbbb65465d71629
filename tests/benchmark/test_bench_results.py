"""Results on disk: the CSV schema, row replacement, and two processes writing at once."""

from __future__ import annotations

import csv
import multiprocessing as mp

import pytest
import torch

from labmagic.benchmark import Race, bench, provenance
from labmagic.store import bench_csv as results
from labmagic.timing import WallTimer

REQUIRED = [
    "chapter", "variant", "backend", "shape", "dtype", "status", "ms_median", "ms_min", "ms_max", "tflops", "gbps",
    "sol_pct", "vs_ref", "predicted_ms", "peak_mem_bytes", "alloc_retries", "sdpa_backend", "err_over_tol", "timer",
    "gpu", "driver", "cuda", "torch", "triton", "jax", "git_commit", "source_hash", "timestamp",
]


def _race():
    return Race(chapter="test_csv", variants={"torch": lambda a, b: a + b, "torch_wrong": lambda a, b: a - b},
                ref="torch", make_inputs=lambda *s: (torch.randn(*s), torch.randn(*s)),
                shapes=[(16, 8), 256], check_shapes=[(3,), (5, 7)], flops=lambda *s: float(torch.Size(s).numel()),
                nbytes=lambda *s: 12.0 * torch.Size(s).numel())


def test_csv_schema_of_a_measured_result(tmp_path):
    result = bench(_race(), timer=WallTimer(reps=2), plot=False)
    path = tmp_path / "bench" / "test_csv.csv"
    result.save(path, png_path=False)
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        rows = list(reader)
    missing = [c for c in REQUIRED if c not in reader.fieldnames]
    assert not missing
    assert reader.fieldnames[: len(results.COLUMNS)] == results.COLUMNS
    assert len(rows) == 4
    ok = next(r for r in rows if r["variant"] == "torch" and r["shape"] == "16x8")
    assert ok["status"] == "ok" and float(ok["ms_median"]) > 0 and ok["backend"] == "torch"
    assert ok["timer"] == "wall" and ok["sdpa_backend"] == "-" and ok["dtype"] == "float32"
    assert ok["torch"] == torch.__version__.split("+")[0] or ok["torch"].startswith(torch.__version__.split("+")[0])
    assert len(ok["source_hash"]) == 12 and ok["timestamp"].endswith("+00:00")
    assert ok["chapter_hash"] == ""  # "test_csv" is no notebook of the book: nothing to hash
    bad = next(r for r in rows if r["variant"] == "torch_wrong")
    assert bad["status"] == "mismatch" and bad["ms_median"] == "" and "differ" in bad["error"]


def test_a_new_run_replaces_only_the_rows_it_remeasured(tmp_path):
    path = tmp_path / "c.csv"
    base = {"chapter": "c", "dtype": "float32", "status": "ok"}
    results.write_rows(path, [{**base, "variant": v, "shape": s, "ms_median": 1.0}
                              for v in ("a", "b") for s in ("1", "2")])
    results.write_rows(path, [{**base, "variant": "a", "shape": "2", "ms_median": 5.0}])
    rows = results.read_rows(path)
    assert len(rows) == 4
    by_key = {(r["variant"], r["shape"]): r["ms_median"] for r in rows}
    assert by_key == {("a", "1"): "1", ("b", "1"): "1", ("b", "2"): "1", ("a", "2"): "5"}
    assert not list(tmp_path.glob("*.tmp"))  # the temporary file was renamed, not left behind


def _writer(path: str, variant: str, n: int, barrier) -> None:
    barrier.wait()
    for i in range(n):
        results.write_rows(path, [{"chapter": "c", "variant": variant, "shape": str(i), "dtype": "float32",
                                   "status": "ok", "ms_median": i + 1}])


def test_two_processes_writing_at_once_lose_no_rows(tmp_path):
    path = tmp_path / "bench" / "c.csv"
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    n = 40
    procs = [ctx.Process(target=_writer, args=(str(path), v, n, barrier)) for v in ("p", "q")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    rows = results.read_rows(path)
    assert len(rows) == 2 * n
    assert {(r["variant"], r["shape"]) for r in rows} == {(v, str(i)) for v in "pq" for i in range(n)}


def test_atomic_write_leaves_the_old_file_when_a_row_cannot_be_written(tmp_path):
    path = tmp_path / "c.csv"
    results.write_rows(path, [{"chapter": "c", "variant": "a", "shape": "1", "dtype": "f", "status": "ok"}])
    before = path.read_text()

    class Unprintable:
        def __str__(self):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        results.write_rows(path, [{"chapter": "c", "variant": "b", "shape": "1", "dtype": "f", "status": Unprintable()}])
    assert path.read_text() == before
    assert not list(tmp_path.glob(".c.csv.*"))


def test_provenance_fields():
    prov = provenance.collect()
    assert set(prov) == set(provenance.FIELDS)
    assert prov["torch"] != "-" and prov["gpu"]


def test_saved_plot_and_reloaded_result_cover_every_row_of_the_csv(tmp_path):
    path = tmp_path / "bench" / "test_csv.csv"
    first = bench(_race(), timer=WallTimer(reps=2), plot=False)
    first.save(path)
    again = bench(_race(), variants=["torch"], shapes=[256], timer=WallTimer(reps=2), plot=False)
    again.save(path)
    assert path.with_suffix(".png").read_bytes().startswith(b"\x89PNG")
    from labmagic.benchmark import load_result

    loaded = load_result(path)
    assert len(loaded.rows) == 4  # the second run replaced one row and kept three
    row = loaded.row("torch", 256)
    assert row.ms_median == pytest.approx(again.row("torch", 256).ms_median, rel=1e-5)
    assert row.status == "ok" and isinstance(row.alloc_retries, int) and row.below_floor is False
    assert "torch_wrong" in repr(loaded)


def test_a_chapter_racing_two_dtypes_gets_one_plot_per_dtype(tmp_path):
    path = tmp_path / "bench" / "test_csv.csv"
    bench(_race(), timer=WallTimer(reps=2), plot=False).save(path)
    assert path.with_suffix(".png").exists()  # one dtype so far: the plain name
    race64 = _race()
    race64.dtype = "float64"
    again = bench(race64, timer=WallTimer(reps=2), plot=False)
    again.save(path)
    pngs = sorted(p.name for p in path.parent.glob("*.png"))
    assert pngs == ["test_csv.float32.png", "test_csv.float64.png"]  # the mixed plot is gone
    assert again.png_path.name == "test_csv.float64.png"


def test_a_race_of_a_book_chapter_stamps_each_row_with_the_chapters_hash_now():
    from labmagic.paths import repo_root
    from labmagic.store.fingerprint import chapter_hash

    race = Race(chapter="01_vector_add", variants={"torch": lambda a, b: a + b}, ref="torch",
                make_inputs=lambda n: (torch.randn(n), torch.randn(n)), shapes=[64], check_shapes=[(5,)],
                flops=lambda n: float(n), nbytes=lambda n: 12.0 * n)
    result = bench(race, timer=WallTimer(reps=2), plot=False)
    assert {row.chapter_hash for row in result.rows} == {chapter_hash(repo_root() / "book" / "01_vector_add.ipynb")}
    assert provenance.chapter_fingerprint("no_such_chapter") == ""
