"""``labmagic exercise``: lists, grades a chapter's exercises from a notebook or the solutions, and says in one line
what it cannot do."""

from __future__ import annotations

import json
import shutil

import pytest

from labmagic.cli import main
from labmagic.exercises import registry


def test_no_arguments_lists_the_exercises(capsys):
    assert main(["exercise"]) == 0
    out = capsys.readouterr().out
    assert "01_vector_add  (book/exercises/01_vector_add.ipynb)" in out
    assert all(e.name in out for e in registry.all_exercises())


@pytest.mark.parametrize("argv, message", [
    (["exercise", "99"], "no chapter '99' has exercises"),
    (["exercise", "01", "no_such"], "no exercise 'no_such' in chapter 01_vector_add"),
    (["exercise", "--all", "01", "copy_float4"], "--all grades every exercise (of a chapter, when one is named)"),
    (["exercise", "01", "--solution", "--notebook", "x.ipynb"], "--solution and --notebook"),
])
def test_bad_arguments_are_one_line(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_a_solution_is_graded_and_exits_zero(capsys):
    assert main(["exercise", "04", "rmsnorm_rows", "--solution", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "exercise rmsnorm_rows (rmsnorm_rows.ipynb): CORRECT" in out and "speed not graded: needs a GPU" in out


def test_a_notebook_without_the_cells_is_not_graded_and_exits_one(capsys, tmp_path):
    copy = tmp_path / "mine.ipynb"
    shutil.copy(registry.notebook_path("01"), copy)
    nb = json.loads(copy.read_text())
    nb["cells"] = [c for c in nb["cells"] if "copy_float4" not in "".join(c["source"])]
    copy.write_text(json.dumps(nb))
    assert main(["exercise", "01", "copy_float4", "--notebook", str(copy)]) == 1
    out = capsys.readouterr().out
    assert "copy_float4  not_graded" in out and "no cell in mine.ipynb is marked" in out
