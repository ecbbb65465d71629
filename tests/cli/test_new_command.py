"""``labmagic new NAME`` in a scratch checkout: the chapter it writes passes ``labmagic test`` and nbval untouched on
CPU; a name or number the book cannot take is one line, and nothing is written."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from sitebuild import scratch_checkout, write_chapter

import labmagic
from labmagic.child.protocol import child_env
from labmagic.cli import main


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A checkout with chapters 01 and 03 (so the next free number is 04), as LABMAGIC_ROOT."""
    root = scratch_checkout(tmp_path / "repo", with_chapters=False)
    write_chapter(root / "book" / "01_alpha.ipynb", "print('alpha')", title="01 · Alpha")
    write_chapter(root / "book" / "03_gamma.ipynb", "print('gamma')", title="03 · Gamma")
    monkeypatch.setenv("LABMAGIC_ROOT", str(root))
    return root


def _listing(root):
    return sorted(p.name for p in (root / "book").iterdir())


def _race_chapter(notebook) -> str:
    cells = json.loads(notebook.read_text())["cells"]
    race = next("".join(c["source"]) for c in cells if "labmagic.Race(" in "".join(c["source"]))
    return race.split('chapter="', 1)[1].split('"', 1)[0]


def _run(root, *argv):
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=root, timeout=600,
                          env=child_env(LABMAGIC_ROOT=str(root), LABMAGIC_FORCE_CPU="1"))


@pytest.mark.slow
@pytest.mark.skipif(labmagic.has_gpu(), reason="CPU-mode behaviour (the CUDA variant is needs_gpu)")
def test_a_new_chapter_passes_labmagic_test_and_nbval_untouched(repo):
    made = _run(repo, "-m", "labmagic.cli", "new", "layer_norm")
    assert made.returncode == 0, made.stderr
    notebook = repo / "book" / "04_layer_norm.ipynb"
    assert notebook.exists() and str(notebook) in made.stdout
    nb = json.loads(notebook.read_text())
    params = [c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", [])]
    assert len(params) == 1 and "".join(params[0]["source"]).startswith('size = "full"')
    assert _race_chapter(notebook) == "04_layer_norm"  # its rows go to results/<gpu>/bench/04_layer_norm.csv

    checked = _run(repo, "-m", "labmagic.cli", "test", "04")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    rows = {line.split()[0]: line.split()[2] for line in checked.stdout.splitlines() if line.split()[1:2]
            in (["torch"], ["cuda"], ["triton"])}
    assert rows == {"torch": "pass", "cuda_naive": "needs", "triton": "pass"}
    assert checked.stdout.rstrip().endswith("passed: 2 pass, 1 needs GPU")

    nbval = _run(repo, "-m", "pytest", "--nbval-lax", "--nbval-current-env", "-p", "no:cacheprovider", "-q",
                 str(notebook))
    assert nbval.returncode == 0, nbval.stdout[-3000:]
    assert " passed" in nbval.stdout and "failed" not in nbval.stdout


@pytest.mark.parametrize("argv, number", [(["softmax_two"], "04"), (["softmax_two", "--number", "7"], "07"),
                                          (["12_softmax_two"], "12"), (["12_softmax_two", "--number", "12"], "12")])
def test_the_number_is_the_next_free_one_or_the_one_given(repo, capsys, argv, number):
    assert main(["new", *argv]) == 0
    notebook = repo / "book" / f"{number}_softmax_two.ipynb"
    assert notebook.exists() and _race_chapter(notebook) == f"{number}_softmax_two"
    assert f"labmagic test {number}" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["Layer-Norm"], "chapter 'Layer-Norm' is not a chapter name: use lower-case letters, digits and underscores"),
    (["../escape"], "chapter '../escape' is not a chapter name"),
    (["alpha"], "a chapter named 'alpha' exists: book/01_alpha.ipynb"),
    (["09_alpha"], "a chapter named 'alpha' exists: book/01_alpha.ipynb"),
    (["delta", "--number", "3"], "chapter number 03 is taken by book/03_gamma.ipynb: give another with --number "
                                 "(the next free one after the last chapter is 04)"),
    (["05_delta", "--number", "6"], "'05_delta' has the number 05 and --number says 6"),
    (["delta", "--number", "100"], "--number 100: a chapter's number has two digits, 0-99"),
    (["2048"], "'2048' is not a chapter's name: it starts with a letter"),
    (["05_"], "'05_' has no name after its number"),
])
def test_a_name_or_number_the_book_cannot_take_is_one_line_and_writes_nothing(repo, capsys, argv, message):
    before = _listing(repo)
    assert main(["new", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"LabError: {message}") and err.count("\n") == 1, err
    assert _listing(repo) == before
