"""``labmagic sweep --scheduler``: chapters run on a real Dask cluster (LocalCluster worker processes, real papermill)
store what a sweep on this machine stores, resume the same way, keep failures' error notebooks, survive a lost
worker, write nothing for a task that raised, refuse uncommitted chapters, and stop cleanly on Ctrl-C."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sitebuild import ROOT, run_command, write_chapter

from labmagic.cli import cluster as cluster_cmd
from labmagic.cli import main
from labmagic.cli import sweep as sweep_cmd
from labmagic.errors import LabError
from labmagic.execute.chapter_result import ChapterResult, publish
from labmagic.execute.checkout import driver_commit
from labmagic.execute.dask_sweep import cluster_kinds, gpu_worker_cluster, worker_resources
from labmagic.execute.remote_chapter import ChapterTask, run_chapter_on_worker, worker_identity
from labmagic.store import manifest
from labmagic.store.bench_csv import bench_csv_path, read_rows
from labmagic.store.schema import KEY

pytestmark = pytest.mark.slow

#: The first run of this cell kills its Dask worker's process (the kernel's parent is papermill, whose parent is the
#: worker) and then the kernel; the marker file makes the retry pass.
KILL_WORKER_ONCE = '''import os, pathlib, signal
marker = pathlib.Path({marker!r})
if not marker.exists():
    papermill = os.getppid()
    worker = int(pathlib.Path(f"/proc/{{papermill}}/stat").read_text().rpartition(")")[2].split()[1])
    marker.write_text(str(worker))
    os.kill(worker, signal.SIGKILL)
    os._exit(1)
print("delta ran again on a live worker")'''

#: A cell that says it started (with its pid) and then sleeps: what Ctrl-C interrupts.
SLOW_CELL = '''import os, pathlib, time
pathlib.Path({marker!r}).write_text(str(os.getpid()))
time.sleep(120)'''


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie waiting for its parent does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def _results(root: Path) -> Path:
    return root / "results" / "cpu"


def _row_keys(path: Path) -> list[tuple]:
    return sorted((*(row[k] for k in KEY), row["status"]) for row in read_rows(path))


def _one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("LabError: "), err
    return err


def test_a_cluster_sweep_stores_what_a_serial_sweep_stores_and_resumes(cluster_repo, tmp_path, monkeypatch, capsys,
                                                                       dask_scheduler):
    serial = shutil.copytree(cluster_repo, tmp_path / "serial")
    monkeypatch.setenv("LABMAGIC_ROOT", str(serial))
    assert run_command(sweep_cmd, ["01", "03"]) == 0
    monkeypatch.setenv("LABMAGIC_ROOT", str(cluster_repo))
    assert run_command(sweep_cmd, ["01", "03", "--scheduler", "local", "--workers", "2"]) == 0
    assert "sweep: 2 passed, 0 failed, 0 skipped" in capsys.readouterr().out
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cluster_repo, capture_output=True, text=True).stdout.strip()

    for chapter in ("01_alpha", "03_gamma"):
        here, there = _results(serial), _results(cluster_repo)
        local, remote = (json.loads((r / "notebooks" / f"{chapter}.json").read_text()) for r in (here, there))
        for key in ("status", "input_hash", "size", "device"):
            assert remote[key] == local[key], (chapter, key)
        assert remote["status"] == "passed" and remote["device"] == "cpu"
        assert remote["commit"] == head and remote["worker"].startswith("tcp://127.0.0.1:")
        executed = there / "notebooks" / f"{chapter}.ipynb"
        assert manifest.published_by(remote, executed)  # the bytes that came back are the ones the record vouches for
        assert f"{chapter} wrote 2 rows" in (there / "notebooks" / f"{chapter}.log").read_text()
        rows = _row_keys(there / "bench" / f"{chapter}.csv")
        assert rows == _row_keys(here / "bench" / f"{chapter}.csv") and len(rows) == 2
        assert (there / "bench" / f"{chapter}.png").read_bytes() == f"a plot of {chapter}".encode()
        assert manifest.up_to_date(cluster_repo / "book" / f"{chapter}.ipynb", "cpu", "full")
    assert not any(p.name.startswith(".") for p in there.rglob("*") if p.suffix != ".lock")  # no temporaries

    # Resumable: both are up to date on kind cpu, so nothing is submitted and nothing is rewritten.
    before = {p: p.stat().st_mtime_ns for p in _results(cluster_repo).rglob("*") if p.is_file()}
    assert run_command(sweep_cmd, ["01", "03", "--scheduler", dask_scheduler]) == 0
    assert "sweep: 0 passed, 0 failed, 2 skipped (up to date)" in capsys.readouterr().out
    assert {p: p.stat().st_mtime_ns for p in _results(cluster_repo).rglob("*") if p.is_file()} == before


def test_a_failing_chapter_keeps_its_error_notebook_and_the_last_passing_run(cluster_repo, capsys, dask_scheduler):
    earlier = {"chapter": "02_beta", "status": "passed", "size": "full", "input_hash": "0123456789abcdef",
               "started": "2026-01-01T00:00:00+00:00", "seconds": 1.0, "device": "cpu"}
    manifest.write_manifest(earlier)
    assert run_command(sweep_cmd, ["02", "--scheduler", dask_scheduler]) == 1
    out = capsys.readouterr().out
    assert "failed 02_beta: ValueError: beta is broken on purpose" in out and "error notebook:" in out
    record = manifest.read_manifest("cpu", "02_beta")
    assert record["status"] == "failed" and record["error"] == "ValueError: beta is broken on purpose"
    assert record["last_passed"] == {"input_hash": "0123456789abcdef", "size": "full",
                                     "started": "2026-01-01T00:00:00+00:00"}
    executed = _results(cluster_repo) / "notebooks" / "02_beta.ipynb"
    assert "beta is broken on purpose" in executed.read_text() and manifest.published_by(record, executed)


def test_kinds_the_cluster_lacks_are_named_with_the_ones_it_has(cluster_repo, capsys, dask_scheduler):
    err = _one_line_error(capsys, ["sweep", "01", "--scheduler", dask_scheduler, "--kinds", "nvidia-h200"])
    assert "no worker of kind nvidia-h200" in err and "it has cpu (2 workers)" in err
    err = _one_line_error(capsys, ["sweep", "01", "--scheduler", dask_scheduler, "--kinds", "NVIDIA H200"])
    assert "is not a GPU kind" in err
    err = _one_line_error(capsys, ["sweep", "01", "--kinds", "all"])
    assert "--kinds is for sweeps on a Dask cluster" in err
    err = _one_line_error(capsys, ["sweep", "01", "--scheduler", "somewhere"])
    assert "--scheduler takes local, local-cuda or a scheduler's address" in err
    assert not (_results(cluster_repo) / "notebooks").exists()  # nothing ran


def test_a_worker_lost_mid_chapter_is_retried_on_another_of_its_kind(cluster_repo, tmp_path, capsys, git_commit,
                                                                     dask_scheduler):
    marker = tmp_path / "killed-worker.pid"
    write_chapter(cluster_repo / "book" / "04_delta.ipynb", KILL_WORKER_ONCE.format(marker=str(marker)), title="Delta")
    git_commit(cluster_repo, "delta")
    assert run_command(sweep_cmd, ["04", "--scheduler", dask_scheduler]) == 0
    out = capsys.readouterr().out
    assert "sweep: 1 passed, 0 failed" in out
    assert re.search(r"^  re-run 04_delta: ran 2 times: its worker tcp://\S+ was lost mid-chapter; the last try ran "
                     r"on tcp://\S+$", out, re.MULTILINE), out  # the summary says so
    assert not _alive(int(marker.read_text()))  # the first try ran, and killed its worker
    record = manifest.read_manifest("cpu", "04_delta")
    assert record["status"] == "passed"
    assert "delta ran again on a live worker" in (_results(cluster_repo) / "notebooks" / "04_delta.log").read_text()


def test_a_kind_whose_workers_are_all_lost_fails_its_chapters_instead_of_waiting_forever(
        cluster_repo, tmp_path, capsys, git_commit, monkeypatch):
    from labmagic.execute import dask_sweep
    from labmagic.execute.dask_sweep import local_cluster

    marker = tmp_path / "started.pid"
    write_chapter(cluster_repo / "book" / "04_delta.ipynb", SLOW_CELL.format(marker=str(marker)), title="Delta")
    git_commit(cluster_repo, "delta")
    monkeypatch.setattr(dask_sweep, "ORPHAN_GRACE_S", 3.0)
    with local_cluster(1, local_directory=str(tmp_path / "dask")) as cluster:
        def lose_the_only_worker():
            deadline = time.monotonic() + 120
            while not marker.exists() and time.monotonic() < deadline:
                time.sleep(0.2)
            cluster.scale(0)  # the worker goes, and nothing starts another of its kind

        loser = threading.Thread(target=lose_the_only_worker, daemon=True)
        loser.start()
        start = time.monotonic()
        assert run_command(sweep_cmd, ["04", "--scheduler", cluster.scheduler_address]) == 1
        assert time.monotonic() - start < 150
        loser.join(timeout=10)
    out = capsys.readouterr().out
    assert "failed 04_delta: no worker of kind cpu has been on the cluster for" in out and "nothing was written" in out
    kernel, deadline = int(marker.read_text()), time.monotonic() + 15
    while _alive(kernel) and time.monotonic() < deadline:  # papermill is tethered to the worker; its kernel polls it
        time.sleep(0.2)
    assert not _alive(kernel), "the chapter's kernel outlived its worker"
    assert not (_results(cluster_repo) / "notebooks" / "04_delta.ipynb").exists()


def test_a_dirty_tree_is_refused_and_a_task_that_raised_writes_nothing(cluster_repo, capsys, dask_scheduler):
    write_chapter(cluster_repo / "book" / "05_epsilon.ipynb", "print('never committed')", title="Epsilon")
    err = _one_line_error(capsys, ["sweep", "05", "--scheduler", dask_scheduler])
    assert "uncommitted changes under book/ or labmagic/ (book/05_epsilon.ipynb)" in err and "--allow-dirty" in err

    assert main(["sweep", "05", "01", "--scheduler", dask_scheduler, "--allow-dirty"]) == 1
    captured = capsys.readouterr()
    assert "--allow-dirty: the workers run commit" in captured.err
    assert "failed 05_epsilon: LabError: book/05_epsilon.ipynb is not in commit" in captured.out
    assert "(nothing was written)" in captured.out and "error notebook" not in captured.out
    assert "1 passed, 1 failed" in captured.out
    assert not [p for p in _results(cluster_repo).rglob("*05_epsilon*")]
    assert manifest.read_manifest("cpu", "01_alpha")["left_out"] == ["book/05_epsilon.ipynb"]


def test_reference_writes_the_books_notebook_from_the_books_gpu_only(cluster_repo, monkeypatch, capsys,
                                                                     dask_scheduler):
    err = _one_line_error(capsys, ["sweep", "01", "--scheduler", dask_scheduler, "--reference"])
    assert "come from nvidia-h200; this sweep runs on cpu: the cluster has no nvidia-h200 worker" in err
    monkeypatch.setenv("LABMAGIC_BOOK_GPU", "cpu")
    assert main(["sweep", "01", "--scheduler", dask_scheduler, "--reference"]) == 0
    assert "alpha size=full" in (cluster_repo / "book" / "01_alpha.ipynb").read_text()  # outputs written back


def test_a_sweep_here_does_not_import_dask(tiny_repo):
    code = ("import sys; from labmagic.cli import main; main(['sweep', '--list']); main(['cluster']); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "01_alpha: to run on cpu" in done.stdout and done.stdout.strip().endswith("[]")


def test_a_checkout_without_a_commit_is_refused_before_connecting(tiny_repo, capsys):
    err = _one_line_error(capsys, ["sweep", "01", "--scheduler", "tcp://127.0.0.1:9"])
    assert "runs chapters at the driver's git commit" in err and str(tiny_repo) in err


def test_ctrl_c_cancels_the_sweep_stops_the_chapter_on_its_worker_and_writes_nothing(cluster_repo, tmp_path,
                                                                                     git_commit, dask_scheduler):
    started = tmp_path / "slow.pid"
    write_chapter(cluster_repo / "book" / "06_slow.ipynb", SLOW_CELL.format(marker=str(started)), title="Slow")
    git_commit(cluster_repo, "slow")
    driver = subprocess.Popen([sys.executable, "-m", "labmagic.cli", "sweep", "06", "--scheduler", dask_scheduler],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    deadline = time.monotonic() + 60
    while not started.exists() or not started.read_text():
        assert driver.poll() is None and time.monotonic() < deadline, "the slow cell never started"
        time.sleep(0.1)
    driver.send_signal(signal.SIGINT)
    out, err = driver.communicate(timeout=60)
    assert driver.returncode == 130, (out, err)
    last = err.strip().splitlines()[-1]
    assert last == "sweep interrupted: 06_slow (previous notebook, log and record kept); 0 chapter(s) not started, " \
                   "0 finished", err
    assert not _alive(int(started.read_text()))  # the kernel on the worker was stopped
    assert not [p for p in _results(cluster_repo).rglob("*06_slow*")]


def test_two_results_for_one_chapter_published_at_once_lose_no_rows(cluster_repo):
    def result(variant: str) -> ChapterResult:
        record = {"chapter": "01_alpha", "device": "cpu", "status": "passed", "size": "full", "input_hash": "x"}
        rows = [{"chapter": "01_alpha", "variant": variant, "backend": "torch", "shape": "64", "dtype": "float32",
                 "status": "ok"}]
        return ChapterResult("01_alpha", "cpu", "passed", record=record, log=b"", rows=rows)

    threads = [threading.Thread(target=lambda v=v: publish(result(v))) for v in (f"v{i}" for i in range(12))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r["variant"] for r in read_rows(bench_csv_path("01_alpha", "cpu"))) == sorted(
        f"v{i}" for i in range(12))

    # A result whose notebook is not the one its record vouches for is refused whole: nothing is written.
    broken = ChapterResult("03_gamma", "cpu", "passed", log=b"log", notebook=b"{}",
                           record={"chapter": "03_gamma", "device": "cpu", "status": "passed", "notebook_hash": "0"},
                           rows=result("v0").rows, files={"bench/03_gamma.png": b"plot"})
    with pytest.raises(LabError, match="not the one its record vouches for"):
        publish(broken)
    assert not [p for p in _results(cluster_repo).rglob("*03_gamma*")]


def test_plain_gpu_workers_each_get_their_gpu_and_a_wrong_kind_is_refused(cluster_repo, git_commit):
    from distributed import Client

    write_chapter(cluster_repo / "book" / "07_env.ipynb",
                  'import os\nprint("visible=" + os.environ["CUDA_VISIBLE_DEVICES"])', title="Env")
    git_commit(cluster_repo, "env")
    commit = driver_commit(cluster_repo)
    # What --scheduler local-cuda starts without dask-cuda: one worker per GPU, CUDA_VISIBLE_DEVICES its own. The
    # first worker is shown two GPUs, its own first, as dask-cuda shows them.
    with gpu_worker_cluster([("7,9", "cpu"), ("9", "nvidia-h200")]) as cluster, Client(cluster) as client:
        who = sorted(client.run(worker_identity).values(), key=lambda w: w["cuda_visible_devices"])
        assert [(w["cuda_visible_devices"], w["resources"]) for w in who] == [
            ("7,9", worker_resources("cpu")), ("9", worker_resources("nvidia-h200"))]
        with pytest.raises(LabError, match=r"advertises nvidia-h200 but its GPU is cpu \(CUDA_VISIBLE_DEVICES=9\)"):
            cluster_kinds(client, "here")

        # The chapter sees its worker's own GPU only, and a worker of the wrong kind refuses a task.
        task = ChapterTask("07_env", "cpu", commit, "full", False, None, "test-sweep")
        result = client.submit(run_chapter_on_worker, task, resources=worker_resources("cpu"), pure=False).result()
        assert result.status == "passed" and result.record["cuda_visible_devices"] == "7"
        assert b"visible=7" in result.log
        wrong = dataclasses.replace(task, kind="nvidia-h200")
        with pytest.raises(LabError, match="was sent a chapter for nvidia-h200 but its GPU is cpu"):
            client.submit(run_chapter_on_worker, wrong, resources=worker_resources("nvidia-h200"), pure=False).result()
    assert not (_results(cluster_repo) / "notebooks").exists()  # a worker writes nothing into the driver's results


def test_labmagic_cluster_worker_starts_a_worker_that_advertises_its_kind(monkeypatch, capsys):
    from distributed import Client, LocalCluster

    monkeypatch.setenv("LABMAGIC_FORCE_CPU", "1")
    assert run_command(cluster_cmd, ["worker", "--scheduler", "tcp://sched:8786", "--print"]) == 0
    assert "dask worker tcp://sched:8786 --nthreads 1 --resources kind-cpu=1 --name" in capsys.readouterr().out
    assert run_command(cluster_cmd, ["resources"]) == 0
    assert capsys.readouterr().out == "kind-cpu=1\n"  # a machine without a GPU offers none
    with LocalCluster(n_workers=0, dashboard_address=":0") as cluster, Client(cluster) as client:
        proc = subprocess.Popen([sys.executable, "-m", "labmagic.cli", "cluster", "worker", "--scheduler",
                                 cluster.scheduler_address], env=dict(os.environ), stderr=subprocess.DEVNULL)
        try:
            client.wait_for_workers(1, timeout=60)
            assert list(cluster_kinds(client, "here")) == ["cpu"]
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 130
        deadline = time.monotonic() + 30
        while client.scheduler_info()["workers"]:  # the worker closed and left
            assert time.monotonic() < deadline
            time.sleep(0.2)


def test_the_two_gpu_demo_prints_its_plan(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "dask_sweep_demo.py"), "--dry-run", "--out",
                           str(tmp_path / "demo")], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    plan = done.stdout
    assert "sweep 01 03 04 --quick --force --gpus all" in plan
    assert "sweep 01 03 04 --quick --force --scheduler local-cuda --kinds all" in plan
    assert not (tmp_path / "demo").exists()  # a dry run writes nothing
