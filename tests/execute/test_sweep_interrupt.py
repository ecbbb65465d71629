"""An interrupted sweep leaves nothing that a later sweep would trust.

Ctrl-C (to the sweep, or to its whole process group as a terminal sends it) or SIGTERM stops the running chapters:
their papermill and kernel are gone when ``labmagic sweep`` exits with 130, the previous notebook, log and record
are byte for byte what they were, no temporary is left, and the next sweep runs the chapter again. What the run got
to (its notebook as papermill last saved it, and its log) is kept apart, in ``results/<gpu>/interrupted/``. A record vouches
for one executed notebook, so ``up_to_date`` is not fooled by a notebook written over it afterwards.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sitebuild import run_command, write_chapter

from labmagic.cli import sweep as sweep_cmd
from labmagic.execute import papermill_run
from labmagic.execute.papermill_run import Children, run_chapter
from labmagic.store import manifest
from labmagic.store.fingerprint import chapter_hash

pytestmark = pytest.mark.slow

#: The slow cell announces itself (in the log, and by a file, whatever the log is called or however buffered), then
#: sleeps while the flag file exists (so that a later run of the same source is quick).
SLOW_CELL = ('import os, time\nprint("slow cell starts", flush=True)\nopen({mark!r}, "w").close()\n'
             'time.sleep(30 if os.path.exists({flag!r}) else 0)')


def _notebooks(root: Path) -> Path:
    return root / "results" / "cpu" / "notebooks"


def _snapshot(folder: Path) -> dict[str, bytes]:
    """Every file in ``folder``, hidden ones (temporaries) included."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _slow_chapters(root: Path, chapters: list[str], flag: Path) -> None:
    for chapter in chapters:
        cell = SLOW_CELL.format(mark=str(flag.parent / f"{chapter}.started"), flag=str(flag))
        write_chapter(root / "book" / f"{chapter}.ipynb", 'print("fast part")', cell)


def _slow_cell_started(flag: Path, chapter: str) -> bool:
    return (flag.parent / f"{chapter}.started").exists()


def _wait_for(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the slow cell to start"
        time.sleep(0.1)


def _proc_stat(pid: int) -> list[str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()  # state, ppid, pgid, ...


def _descendants(pid: int) -> dict[int, str]:
    """pid -> command line of every process below ``pid``."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _proc_stat(int(entry.name))):
            parents[int(entry.name)] = int(stat[1])
    found, frontier = {}, {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier and p not in found}
        for p in frontier:
            try:
                found[p] = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                found[p] = ""
    return found


def _alive(pid: int) -> bool:
    stat = _proc_stat(pid)
    return stat is not None and stat[0] != "Z"


def _kill_leftovers(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


@pytest.mark.parametrize("how", ["sigint", "sigterm", "ctrl-c to the group"])
def test_an_interrupted_sweep_keeps_the_previous_run_and_leaves_nothing_running(tiny_repo, tmp_path, capsys, how):
    chapters = ["01_alpha", "03_gamma"] if how == "ctrl-c to the group" else ["01_alpha"]
    notebooks = _notebooks(tiny_repo)
    assert run_command(sweep_cmd, ["--quick", *chapters]) == 0  # the previous, finished run
    before = _snapshot(notebooks)
    flag = tmp_path / "sleep"
    flag.touch()
    _slow_chapters(tiny_repo, chapters, flag)
    workers = ["--gpus", "0,0"] if len(chapters) > 1 else []  # two chapters at once, one worker each
    sweep = subprocess.Popen([sys.executable, "-m", "labmagic.cli", "sweep", "--quick", *workers, *chapters],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    children: dict[int, str] = {}
    try:
        _wait_for(lambda: all(_slow_cell_started(flag, c) for c in chapters))
        children = _descendants(sweep.pid)
        assert sum("papermill" in cmd for cmd in children.values()) == len(chapters), children
        assert sum("ipykernel" in cmd for cmd in children.values()) == len(chapters), children
        if how == "ctrl-c to the group":
            os.killpg(sweep.pid, signal.SIGINT)  # what a terminal does: the whole foreground group
        else:
            sweep.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGINT)
        _, err = sweep.communicate(timeout=30)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
        survivors = [pid for pid in children if _alive(pid)]
        _kill_leftovers(survivors)
    assert sweep.returncode == 130, err[-3000:]
    assert not survivors, f"still running after the sweep exited: {[children[p] for p in survivors]}"
    said = [line for line in err.splitlines() if line.startswith("sweep interrupted:")]
    assert len(said) == 1 and all(c in said[0] for c in chapters), err[-3000:]
    assert "Traceback" not in err
    assert _snapshot(notebooks) == before  # notebook, log and record untouched; no temporaries left
    # What ran before the stop is kept apart, for the record of a run cut short: every cell papermill saved.
    interrupted = tiny_repo / "results" / "cpu" / "interrupted"
    for chapter in chapters:
        kept = json.loads((interrupted / f"{chapter}.ipynb").read_text())
        assert any("fast part" in "".join(o.get("text", "")) for c in kept["cells"] for o in c.get("outputs", []))
        assert "slow cell starts" in (interrupted / f"{chapter}.log").read_text()
        assert str(interrupted / f"{chapter}.ipynb") in said[0]
    assert not [p.name for p in interrupted.iterdir() if p.name.startswith(".")]

    flag.unlink()
    capsys.readouterr()
    assert run_command(sweep_cmd, ["--quick", *chapters]) == 0  # the interrupted chapters run again
    assert f"{len(chapters)} passed, 0 failed, 0 skipped" in capsys.readouterr().out
    for chapter in chapters:
        record = json.loads((notebooks / f"{chapter}.json").read_text())
        assert record["input_hash"] == chapter_hash(tiny_repo / "book" / f"{chapter}.ipynb")
        assert "slow cell starts" in (notebooks / f"{chapter}.log").read_text()
    assert not [p.name for p in notebooks.iterdir() if p.name.startswith(".")]


def test_run_chapter_interrupted_in_the_main_thread_stops_its_child(tiny_repo, tmp_path):
    """Called directly (not by a sweep's worker), Ctrl-C lands in run_chapter itself: it stops papermill and its
    kernel before it lets the KeyboardInterrupt through, and publishes nothing."""
    notebooks = _notebooks(tiny_repo)
    assert run_command(sweep_cmd, ["--quick", "01"]) == 0
    before = _snapshot(notebooks)
    flag = tmp_path / "sleep"
    flag.touch()
    _slow_chapters(tiny_repo, ["01_alpha"], flag)
    children: dict[int, str] = {}
    # Children this test process had already (a compile worker, a resource tracker) are not run_chapter's.
    earlier = set(_descendants(os.getpid()))

    def interrupt_when_sleeping():
        _wait_for(lambda: _slow_cell_started(flag, "01_alpha"))
        children.update({pid: cmd for pid, cmd in _descendants(os.getpid()).items() if pid not in earlier})
        os.kill(os.getpid(), signal.SIGINT)

    helper = threading.Thread(target=interrupt_when_sleeping, daemon=True)
    helper.start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_chapter(tiny_repo / "book" / "01_alpha.ipynb", "cpu", "quick", inject_size=True)
    finally:
        survivors = [pid for pid in children if _alive(pid)]
        _kill_leftovers(survivors)
    helper.join(5)
    assert time.monotonic() - started < 25  # it did not sit out the 30 s sleep
    assert any("ipykernel" in cmd for cmd in children.values()), children
    assert not survivors, [children[p] for p in survivors]
    assert _snapshot(notebooks) == before
    assert "slow cell starts" in (tiny_repo / "results" / "cpu" / "interrupted" / "01_alpha.log").read_text()


#: A stand-in for papermill: it starts a "kernel" in a session of its own (as jupyter_client does) that ignores
#: SIGINT, prints the kernel's pid, and then ignores SIGINT itself or not.
FAKE_PAPERMILL = """
import signal, subprocess, sys, time
kernel = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                           "print(flush=True); time.sleep(60)"], start_new_session=True, stdout=subprocess.PIPE)
kernel.stdout.readline()  # the kernel ignores SIGINT from here on
if sys.argv[1] == "deaf":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
print(kernel.pid, flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("papermill", ["deaf", "leaves its kernel behind"])
def test_an_interrupt_leaves_no_child_or_kernel_running(monkeypatch, papermill):
    """What does not stop on SIGINT is killed after the grace period, and a kernel in a session of its own that
    outlives its papermill is killed with it (nothing else would stop it writing into results/)."""
    monkeypatch.setattr(papermill_run, "STOP_GRACE_S", 0.5)
    children = Children()
    proc = children.spawn([sys.executable, "-c", FAKE_PAPERMILL, papermill.split()[0]], stdout=subprocess.PIPE,
                          text=True)
    kernel = int(proc.stdout.readline())
    try:
        children.interrupt()
        code = children.reap(proc)
        children.finished(proc)
        _wait_for(lambda: not _alive(kernel), 5)
    finally:
        _kill_leftovers([proc.pid, kernel])
        proc.stdout.close()
    assert code == (-signal.SIGKILL if papermill == "deaf" else -signal.SIGINT)
    assert children.spawn([sys.executable, "-c", "pass"]) is None  # nothing starts once stopping


def test_up_to_date_needs_the_notebook_its_record_vouches_for(tiny_repo):
    notebooks = _notebooks(tiny_repo)
    chapter = tiny_repo / "book" / "01_alpha.ipynb"
    assert run_command(sweep_cmd, ["--quick", "01"]) == 0
    executed = notebooks / "01_alpha.ipynb"
    assert manifest.up_to_date(chapter, "cpu", "quick")
    assert not [p.name for p in notebooks.iterdir() if p.name.startswith(".")]  # no temporaries after a run

    good = executed.read_bytes()
    nb = json.loads(good)
    nb["cells"][-1]["outputs"] = []  # what a run cut short, or written over afterwards, might leave
    executed.write_text(json.dumps(nb))
    assert not manifest.up_to_date(chapter, "cpu", "quick")
    executed.write_bytes(good)
    assert manifest.up_to_date(chapter, "cpu", "quick")
    record = json.loads((notebooks / "01_alpha.json").read_text())
    assert record["notebook_hash"] == manifest.notebook_hash(executed)


def test_a_record_from_before_notebook_hashes_is_not_fooled_by_a_later_papermill_run(tiny_repo):
    """A record written before records kept the notebook's hash still vouches for the notebook its run wrote, and
    not for one that a later (interrupted, orphaned) papermill run wrote over it: papermill's start time tells."""
    import papermill

    notebooks = _notebooks(tiny_repo)
    chapter = tiny_repo / "book" / "01_alpha.ipynb"
    assert run_command(sweep_cmd, ["--quick", "01"]) == 0
    record_path = notebooks / "01_alpha.json"
    record = json.loads(record_path.read_text())
    record.pop("notebook_hash", None)
    record_path.write_text(json.dumps(record))
    assert manifest.up_to_date(chapter, "cpu", "quick")

    time.sleep(1.1)  # the record keeps whole seconds: the later run must start in a later one
    papermill.execute_notebook(str(chapter), str(notebooks / "01_alpha.ipynb"), parameters={"size": "quick"},
                               cwd=str(chapter.parent), kernel_name="python3", progress_bar=False)
    assert not manifest.up_to_date(chapter, "cpu", "quick")


def test_a_run_that_fails_before_papermill_writes_a_notebook_keeps_the_previous_one(tiny_repo, capsys):
    notebooks = _notebooks(tiny_repo)
    assert run_command(sweep_cmd, ["--quick", "01"]) == 0
    previous = (notebooks / "01_alpha.ipynb").read_bytes()
    passed = json.loads((notebooks / "01_alpha.json").read_text())
    (tiny_repo / "book" / "01_alpha.ipynb").write_text('{"cells": [], "nbformat": 4, "nbformat_minor": 5}')
    assert run_command(sweep_cmd, ["--quick", "01"]) == 1  # papermill rejects it before writing anything
    assert (notebooks / "01_alpha.ipynb").read_bytes() == previous  # not an empty temporary moved into place
    failed = json.loads((notebooks / "01_alpha.json").read_text())
    assert failed["status"] == "failed" and failed["last_passed"]["started"] == passed["started"]
    assert "missing an expected key" in (notebooks / "01_alpha.log").read_text()
    assert not [p.name for p in notebooks.iterdir() if p.name.startswith(".")]
