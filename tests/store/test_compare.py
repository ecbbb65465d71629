"""``labmagic results --compare REV`` and the line a sweep ends with: rows slower or faster beyond their noise,
against the rows committed at a revision (read from git with the strict reader) or stored before the sweep."""

from __future__ import annotations

import subprocess

import pytest

from labmagic import cli
from labmagic.errors import LabError
from labmagic.store.bench_csv import write_rows
from labmagic.store.catalog import load
from labmagic.store.compare import compare, rows_at, since_snapshot, snapshot

CSV = "results/nvidia-h200/bench/01_vector_add.csv"


def _row(variant, ms, ci=0.01, shape="4096"):
    """A passing row whose median's interval is ``ms`` +- ``ci`` (relative); ``ci=None``: measured before
    intervals existed."""
    interval = dict(ms_ci_low=ms * (1 - ci), ms_ci_high=ms * (1 + ci), samples=100) if ci is not None else {}
    return dict(chapter="01_vector_add", variant=variant, backend="cuda", shape=shape, dtype="float32", status="ok",
                ms_median=ms, gpu="NVIDIA H200", timestamp="2026-11-30T10:00:00+00:00", **interval)


OLD = [_row("slower", 1.0), _row("faster", 1.0), _row("noisy", 1.0, ci=0.08), _row("steady", 1.0),
       _row("legacy", 1.0, ci=None), _row("gone", 1.0)]
NEW = [_row("slower", 1.10), _row("faster", 0.95), _row("noisy", 1.05, ci=0.08), _row("steady", 1.015),
       _row("legacy", 0.97), _row("added", 1.0)]


def _write(path, rows):
    """The CSV holding exactly ``rows`` (write_rows keeps rows it is not given: a sweep replaces only its own)."""
    path.unlink(missing_ok=True)
    write_rows(path, rows)


def _git(root, *args):
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path):
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "config", "user.email", "t@example.com")
    _git(tmp_path, "config", "user.name", "t")
    _write(tmp_path / CSV, OLD)
    _git(tmp_path, "add", "results")
    _git(tmp_path, "commit", "-qm", "old rows")
    _write(tmp_path / CSV, NEW)
    return tmp_path


def test_rows_move_only_beyond_their_intervals_and_the_threshold(repo):
    result = compare(rows_at(repo, "HEAD"), load(repo), "HEAD")
    verdicts = dict(zip(result.rows["variant"], result.rows["verdict"]))
    # 'noisy' moved 5% inside overlapping intervals; 'steady' 1.5%, under the 2% threshold; 'legacy' has no
    # intervals and is judged by the threshold alone; 'gone' and 'added' are in one side only.
    assert verdicts == {"slower": "slower", "faster": "faster", "noisy": "same", "steady": "same",
                        "legacy": "faster"}
    assert result.line() == ("compared with HEAD: 1 slower, 2 faster beyond noise, 2 the same "
                             "(1 without intervals, judged by the 2% threshold alone)")
    lenient = compare(rows_at(repo, "HEAD"), load(repo), "HEAD", threshold=0.2)
    assert set(lenient.rows["verdict"]) == {"same"}


def test_the_command_lists_the_changed_rows_per_gpu_slowest_first(repo, capsys):
    assert cli.main(["results", "--compare", "HEAD", "--root", str(repo)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("compared with the rows at HEAD: 1 slower, 2 faster")
    assert lines[1] == "nvidia-h200:"
    assert [line.split()[0] for line in lines[2:]] == ["slower", "faster", "faster"]
    assert "+10.0%" in lines[2] and "1 -> 1.1 ms" in lines[2] and "01_vector_add  slower  4096  float32" in lines[2]


def test_a_revision_that_is_not_one_or_a_link_in_results_is_refused(repo, capsys):
    assert cli.main(["results", "--compare", "no-such-rev", "--root", str(repo)]) != 0
    assert "no-such-rev" in capsys.readouterr().err
    with pytest.raises(LabError, match="does not start with '-'"):
        rows_at(repo, "--output=/tmp/x")
    link = repo / "results/nvidia-h200/bench/02_sgemm.csv"
    link.symlink_to("/etc/passwd")
    _git(repo, "add", "results")
    _git(repo, "commit", "-qm", "a link")
    with pytest.raises(LabError, match="02_sgemm.csv at HEAD is not a plain file"):
        rows_at(repo, "HEAD")


@pytest.mark.parametrize("committed", [True, False], ids=["at the revision", "in the working tree"])
def test_control_characters_of_a_crafted_csv_are_shown_not_sent_to_the_terminal(repo, capsys, committed):
    """A variant no writer writes is refused on either side, in one line that shows its escape sequence as text."""
    good = (repo / CSV).read_text()
    assert good.splitlines()[1].startswith("01_vector_add,slower,")
    (repo / CSV).write_text(good.replace("01_vector_add,slower,", "01_vector_add,evil\x1b]0;owned\x07,"))
    if committed:
        _git(repo, "commit", "-qam", "evil")
        (repo / CSV).write_text(good)
    assert cli.main(["results", "--compare", "HEAD", "--root", str(repo)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert "\x1b" not in captured.out + err and "\x07" not in captured.out + err and "\n" not in err
    assert err.startswith(f"LabError: {CSV}, line 2: variant 'evil\\x1b]0;owned\\x07' is not a variant name")
    assert err.endswith("(as committed at HEAD)") == committed


def test_a_sweep_ends_comparing_the_chapters_it_ran_with_the_rows_before_it(repo):
    _write(repo / CSV, OLD)
    write_rows(repo / "results/nvidia-h200/bench/03_online_softmax.csv",
               [dict(_row("torch", 1.0), chapter="03_online_softmax")])
    before = snapshot(repo, ["nvidia-h200"])
    _write(repo / CSV, NEW)
    write_rows(repo / "results/nvidia-h200/bench/03_online_softmax.csv",
               [dict(_row("torch", 3.0), chapter="03_online_softmax")])
    line = since_snapshot(repo, before, {("nvidia-h200", "01_vector_add")})  # 03 did not run in this sweep
    assert line.startswith("compared with the rows stored before this sweep: 1 slower, 2 faster beyond noise, "
                           "2 the same")
    assert line.endswith("`labmagic results --compare HEAD` lists them")
    assert since_snapshot(repo, before, set()).endswith("no chapter ran")
    (repo / CSV).write_text("chapter,variant\n")
    assert since_snapshot(repo, before, {("nvidia-h200", "01_vector_add")}).startswith(
        "not compared with the rows stored before this sweep: results/nvidia-h200/bench/01_vector_add.csv")
