"""A sweep publishes a chapter's notebook only when it is one: papermill killed mid-write, or a full disk under
``results/<gpu>/notebooks``, leaves the previous notebook, log and record byte for byte as they were (the record
never vouches for a file cut short), no temporary behind, and one line in the summary saying so."""

from __future__ import annotations

import json

import pytest
from fulldisk import files, small_disk
from sitebuild import run_command, write_chapter

from labmagic.cli import sweep as sweep_cmd
from labmagic.store import manifest

pytestmark = pytest.mark.slow

#: Papermill (the kernel's parent, through the tether) is killed while its notebook is half written: the cell cuts
#: the notebook short, as a kill during a save does, then kills papermill and leaves.
KILLED_MID_WRITE = '''import os, pathlib, signal
papermill = os.getppid()
args = pathlib.Path(f"/proc/{papermill}/cmdline").read_bytes().split(b"\\0")
output = next(a.decode() for a in args if a.endswith(b".ipynb") and pathlib.Path(a.decode()).name.startswith("."))
pathlib.Path(output).write_text('{"cells": [{"cell_type": "code", "sou')
os.kill(papermill, signal.SIGKILL)
os._exit(1)'''

#: The cell takes all the free space of the notebooks' folder, then shows a large output that papermill must save.
FILLS_THE_DISK = '''import os
from IPython.display import HTML, display
stat = os.statvfs({folder!r})
open(os.path.join({folder!r}, "filler"), "wb").write(bytes(stat.f_bavail * stat.f_frsize))
display(HTML("<b>" + "x" * 300_000 + "</b>"))'''

KEPT = "nothing published, the previous notebook, log and record are kept"


def _first_run(root, capsys) -> dict[str, bytes]:
    assert run_command(sweep_cmd, ["--quick", "01"]) == 0
    capsys.readouterr()
    folder = root / "results" / "cpu" / "notebooks"
    stored = files(folder)
    assert sorted(stored) == ["01_alpha.ipynb", "01_alpha.json", "01_alpha.log"]
    assert manifest.up_to_date(root / "book" / "01_alpha.ipynb", "cpu", "quick")
    return stored


def _failed_line(capsys) -> str:
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("  failed 01_alpha: "))
    assert "error notebook" not in out  # none was published to show
    return line


def test_a_notebook_cut_short_by_a_kill_is_not_published(tiny_repo, capsys):
    folder = tiny_repo / "results" / "cpu" / "notebooks"
    before = _first_run(tiny_repo, capsys)
    write_chapter(tiny_repo / "book" / "01_alpha.ipynb", 'print("alpha")', KILLED_MID_WRITE)
    assert run_command(sweep_cmd, ["--quick", "01"]) == 1
    line = _failed_line(capsys)
    assert "what it wrote is not a notebook (not JSON (" in line and line.endswith(KEPT)
    assert files(folder) == before
    record = json.loads(before["01_alpha.json"])
    assert record["status"] == "passed" and manifest.content_hash(before["01_alpha.ipynb"]) == record["notebook_hash"]


def test_a_full_disk_under_the_notebooks_keeps_the_previous_run(tiny_repo, capsys):
    folder = tiny_repo / "results" / "cpu" / "notebooks"
    with small_disk(folder, "4m"):
        before = _first_run(tiny_repo, capsys)
        write_chapter(tiny_repo / "book" / "01_alpha.ipynb", 'print("alpha")',
                      FILLS_THE_DISK.format(folder=str(folder)))
        assert run_command(sweep_cmd, ["--quick", "01"]) == 1
        line = _failed_line(capsys)
        assert "[Errno 28] No space left on device" in line and line.endswith(KEPT)
        assert files(folder) == before
