"""The exercise notebooks and solutions as files: each statement quotes its bar as the judge computes it, each
exercise has its stub and grading cell, the notebooks are in the site and the solutions are not, and neither is a
chapter to ``labmagic sweep``, the results or the chapters' fingerprints."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from labmagic import paths
from labmagic.exercises import bars, registry, submission
from labmagic.store.fingerprint import chapter_hash

ROOT = Path(__file__).resolve().parents[2]


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _text(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def test_every_statement_quotes_its_bar_as_the_judge_computes_it():
    for exercise in registry.all_exercises():
        bar = bars.bar_value(exercise, "nvidia-h200")
        assert bar is not None, f"{exercise.name}: no measured bar on the H200"
        prose = [_text(c) for c in _cells(registry.notebook_path(exercise.chapter)) if c["cell_type"] == "markdown"]
        statement = next((p for p in prose if f"`{exercise.name}`" in p.split("\n", 1)[0]), None)
        assert statement is not None, f"{exercise.name}: no statement headed with its name"
        assert bar.text in statement, f"{exercise.name}: the statement must say: {bar.text} (labmagic results --bars)"


def test_each_exercise_has_stub_cells_then_a_grading_cell():
    for chapter in registry.chapters():
        cells = [c for c in _cells(registry.notebook_path(chapter)) if c["cell_type"] == "code"]
        assert not any(c.get("outputs") for c in cells), f"{chapter}: exercise notebooks are stored without outputs"
        for exercise in registry.in_chapter(chapter):
            grading = [i for i, c in enumerate(cells) if _text(c).strip() == f"%exercise {exercise.name}"]
            marked = [i for i, c in enumerate(cells) if submission.marked_for(_text(c)) == exercise.name]
            assert len(grading) == 1 and marked and max(marked) < grading[0], exercise.name


def test_the_site_lists_the_exercises_and_leaves_the_solutions_out():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    globs = [entry.get("glob") for part in toc["parts"] for entry in part["chapters"]]
    assert "book/exercises/[0-9][0-9]_*" in globs
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert "book/solutions" in config["exclude_patterns"]
    assert (ROOT / "book" / "solutions" / "conftest.py").is_file()  # nor does nbval collect them


def test_exercise_notebooks_are_no_chapters():
    chapters = paths.all_chapters()
    # Chapters 01-08 each end with exercises (issue 52); 09, the capstone, has none yet.
    assert [p.stem for p in chapters if p.stem < "09"] == [f"{c}" for c in registry.chapters()]
    assert all(p.parent == paths.book_dir() for p in chapters)


def test_a_chapters_fingerprint_ignores_its_exercises_and_solutions(tmp_path):
    """Changing an exercise must not make a chapter's measured rows stale (the H200 rows cannot be re-measured)."""
    import shutil

    book = tmp_path / "book"
    book.mkdir()
    chapter = shutil.copy(paths.book_dir() / "01_vector_add.ipynb", book / "01_vector_add.ipynb")
    before = chapter_hash(Path(chapter))
    shutil.copytree(paths.book_dir() / "exercises", book / "exercises")
    shutil.copytree(paths.book_dir() / "solutions", book / "solutions")
    assert chapter_hash(Path(chapter)) == before
    (book / "01_vector_add").mkdir()  # what a chapter's own folder would do: it is part of the fingerprint
    (book / "01_vector_add" / "kernel.cu").write_text("// changed")
    assert chapter_hash(Path(chapter)) != before
