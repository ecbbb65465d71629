"""Every ``%ncu ... --race R`` line of the book replays its chapter in a child process up to race R, as Nsight
Compute's child does on a GPU. A name defined only in a ``no-replay`` cell (a check, a refusal) reaches the child
as a NameError there: chapter 10's first GPU run lost its ``%ncu`` cell to one. On a CPU the replay runs the same
cells (the GPU-only variants aside), so the mistake shows here first."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from labmagic.child.protocol import child_record, param_args, race_args

BOOK = Path(__file__).resolve().parents[2] / "book"


def ncu_races() -> list[tuple[str, str]]:
    """(chapter file, race) for each distinct ``%ncu ... --race R`` line in the book's code cells."""
    found = []
    for path in sorted(BOOK.glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] == "code":
                for race in re.findall(r"^\s*%ncu\b.*--race (\w+)", source, flags=re.M):
                    if (path.name, race) not in found:
                        found.append((path.name, race))
    return found


def test_the_book_has_ncu_races():
    assert ("10_fp8.ipynb", "race_gemm_rowwise") in ncu_races()


@pytest.mark.parametrize(("chapter", "race"), ncu_races())
def test_the_child_replays_the_chapter_to_the_race_its_ncu_names(chapter, race):
    cmd = [sys.executable, "-m", "labmagic.child", "--chapter", str(BOOK / chapter), "--mode", "list",
           *race_args(race), *param_args({"size": "'quick'"}), "--skip-dsl"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=BOOK.parent)
    record = child_record(proc.stdout)
    assert proc.returncode == 0 and record.get("ok", True) and record.get("variants"), (
        f"{chapter} through {race}: {record.get('error') or proc.stderr[-2000:]}")
