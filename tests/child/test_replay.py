"""The child-process mechanism: replaying a chapter notebook up to ``%bench`` and calling a variant."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from labmagic.child.protocol import child_command, child_record
from labmagic.child.replay import code_cell, replay_cells
from labmagic.dsl import DSLUnavailable, is_stand_in
from labmagic.errors import LabError


def _cell(source: str, tags=()):
    return {"cell_type": "code", "metadata": {"tags": list(tags)}, "source": source, "outputs": [],
            "execution_count": None}


def _notebook(tmp_path):
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": "# A tiny chapter"},
        _cell('size = "full"', tags=["parameters"]),
        _cell("%load_ext labmagic\nimport torch\nimport labmagic.benchmark\nCALLS = []"),
        _cell("def doubled(x):\n    CALLS.append(x.numel())\n    return x * 2\n\n"
              "def added(x):\n    return x + x"),
        _cell('raise RuntimeError("a no-replay cell must not run")', tags=["no-replay"]),
        _cell("r = %ncu doubled\nraise RuntimeError('a %ncu cell in the child would recurse')"),
        _cell("shapes = [(1024,), (4096,)] if size == 'full' else [(8,)]\n"
              "race = labmagic.benchmark.Race(chapter='99_tiny', variants={'torch': added, 'doubled': doubled},\n"
              "    ref='torch', make_inputs=lambda n: (torch.randn(n),), shapes=shapes, check_shapes=[(31,), (3,)],\n"
              "    nbytes=lambda n: 8 * n, flops=lambda n: n)\n"
              "decoy = labmagic.benchmark.Race(chapter='99_tiny', variants={'torch': added}, ref='torch',\n"
              "    make_inputs=lambda n: (torch.randn(n),))"),
        _cell("%bench race --no-plot"),
        _cell('raise RuntimeError("cells after %bench must not run")'),
    ]
    path = tmp_path / "99_tiny.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def test_replay_stops_at_bench_skips_no_replay_and_injects_parameters(tmp_path):
    nb = json.loads(_notebook(tmp_path).read_text())
    cells, bench = replay_cells(nb)
    assert bench == "%bench race --no-plot"
    assert len(cells) == 4 and not any("must not run" in c or "recurse" in c for c in cells)
    cells, _ = replay_cells(nb, {"size": "quick"})
    assert cells[0] == 'size = "full"' and cells[1] == "size = 'quick'"


def test_code_cell_finds_the_first_code_cell_with_a_text(tmp_path):
    path = _notebook(tmp_path)
    assert code_cell(path, "def doubled").startswith("def doubled(x):")
    assert code_cell(path, "labmagic.benchmark.Race").startswith("shapes = ")  # not the markdown, not %bench
    with pytest.raises(LabError, match="99_tiny.ipynb has no code cell containing 'A tiny chapter'"):
        code_cell(path, "A tiny chapter")  # markdown only


def _child(*args, cwd=None):
    proc = subprocess.run([sys.executable, "-m", "labmagic.child", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)
    return proc, child_record(proc.stdout)


def test_child_lists_the_race_the_bench_line_names(tmp_path):
    path = _notebook(tmp_path)
    proc, record = _child("--chapter", str(path), "--mode", "list")
    assert proc.returncode == 0, proc.stderr
    # `decoy` is a race too: only the %bench line says which one is the chapter's.
    assert record["variants"] == ["torch", "doubled"] and record["shapes"] == ["1024", "4096"]
    _, quick = _child("--chapter", str(path), "--mode", "list", "-p", "size=quick")
    assert quick["shapes"] == ["8"]


def test_child_runs_a_variant_at_the_largest_shape(tmp_path):
    path = _notebook(tmp_path)
    proc, record = _child("--chapter", str(path), "--variant", "doubled", "--mode", "run", "--iters", "3",
                          "--warmup", "1")
    assert proc.returncode == 0, proc.stderr
    assert record["ok"] and record["shape"] == "4096" and record["nbytes"] == 8 * 4096 and record["iters"] == 3
    proc, record = _child("--chapter", str(path), "--variant", "doubled", "--mode", "sanitize", "--check-shape")
    assert record["ok"] and record["shape"] == "31"  # the largest check shape
    assert record["sources"] == {}  # no CUDA cells in this chapter


def test_child_reports_errors_as_one_record(tmp_path):
    path = _notebook(tmp_path)
    proc, record = _child("--chapter", str(path), "--variant", "nope", "--mode", "run", "--shape", "2**4")
    assert proc.returncode == 1
    assert record["ok"] is False and "no variant 'nope'" in record["error"]
    nb = json.loads(path.read_text())
    # nb["cells"][3] is the third *code* cell (a markdown cell comes first): the reader's numbering.
    nb["cells"][3]["source"] = "def doubled(x):\n    return undefined_name"
    nb["cells"][3]["source"] += "\nraise ValueError('broken chapter')"
    path.write_text(json.dumps(nb))
    proc, record = _child("--chapter", str(path), "--mode", "list")
    assert record["ok"] is False and "code cell 3" in record["error"] and "broken chapter" in record["error"]


@pytest.mark.parametrize("tokens,shape", [(["4096"], (4096,)), (["64x128"], (64, 128)),
                                          (["2**20+7"], (2**20 + 7,)), (["31", "17", "29"], (31, 17, 29))])
def test_shape_tokens(tokens, shape):
    from labmagic.child.protocol import parse_shape

    assert parse_shape(tokens) == shape


def test_replay_through_a_later_race_passes_the_bench_cells_before_it(tmp_path):
    """Chapter 08 benches race_w8a8 after four other races: naming it replays past their %bench lines (not run, the
    rest of their cells run) and stops at its own."""
    path = _notebook(tmp_path)
    nb = json.loads(path.read_text())
    nb["cells"][-1:] = [
        _cell("x = 1\nif x:\n    r = %bench decoy\n%bench race\nafter = r"),
        _cell("late = labmagic.benchmark.Race(chapter='99_tiny', variants={'torch': added}, ref='torch',\n"
              "    make_inputs=lambda n: (torch.randn(n),), shapes=[(8,)])"),
        _cell("%bench late"),
        _cell('raise RuntimeError("cells after the last named race must not run")'),
    ]
    path.write_text(json.dumps(nb))
    from labmagic.child.replay import benched_races

    assert benched_races(nb) == ["race", "decoy", "late"]
    cells, bench = replay_cells(nb, through=["late", "race"])
    assert bench == "%bench late"
    assert "x = 1\nif x:\n    r = None\npass\nafter = r" in cells and "%bench race --no-plot" not in "".join(cells)
    assert not any("must not run" in c for c in cells) and any(c.startswith("late = ") for c in cells)
    assert replay_cells(nb)[1] == "%bench race --no-plot"  # without names: the first %bench, as before


def test_a_name_a_skipped_cell_defines_is_said_with_the_cells_skipped(tmp_path):
    """Chapter 08 tags the cells that define race_w8a8's variants no-replay: a replay that needs them fails on a
    NameError, and the message says which cells the replay skipped."""
    path = _notebook(tmp_path)
    nb = json.loads(path.read_text())
    nb["cells"][4]["source"] = "SKIPPED_NAME = 1"  # the no-replay cell (code cell 4) defines it now
    nb["cells"][6]["source"] = "x = SKIPPED_NAME\n" + nb["cells"][6]["source"]  # code cell 6 needs it
    path.write_text(json.dumps(nb))
    _, record = _child("--chapter", str(path), "--mode", "list")
    assert record["ok"] is False
    assert record["error"].endswith("raised NameError: name 'SKIPPED_NAME' is not defined (skipped before it, tagged "
                                    "no-replay: code cell 4)")


def _with_dsl_cell(tmp_path):
    path = _notebook(tmp_path)
    nb = json.loads(path.read_text())
    nb["cells"].insert(4, _cell("%%dsl helion -d helion_twice --defines=helion_thrice\n"
                                "raise RuntimeError('a skipped %%dsl cell must not run')"))
    path.write_text(json.dumps(nb))
    return path, nb


def test_skip_dsl_replays_a_dsl_cell_as_the_stand_ins_of_its_variants(tmp_path):
    _, nb = _with_dsl_cell(tmp_path)
    assert any("must not run" in c for c in replay_cells(nb)[0])
    cells, _ = replay_cells(nb, skip_dsl=True)
    stand_ins = [c for c in cells if "_unavailable" in c]
    assert len(stand_ins) == 1 and not any("must not run" in c for c in cells)
    namespace = {}
    exec(stand_ins[0], namespace)  # noqa: S102 (the code the replay runs)
    with pytest.raises(DSLUnavailable, match="helion_twice: helion: not replayed in this child"):
        namespace["helion_twice"](1)
    assert is_stand_in(namespace["helion_thrice"])
    nb["cells"][4]["source"] = "%%dsl helion -d 'os.system(1)'\n"  # the names become source
    with pytest.raises(LabError, match="--defines takes Python names, got 'os.system"):
        replay_cells(nb, skip_dsl=True)


def test_the_child_runs_a_variant_without_the_dsl_cells_when_told_to(tmp_path):
    path, _ = _with_dsl_cell(tmp_path)
    run = ("--chapter", str(path), "--variant", "doubled", "--mode", "run", "--shape", "8", "--warmup", "1")
    proc, record = _child(*run, "--skip-dsl")
    assert proc.returncode == 0 and record["ok"], proc.stderr
    proc, record = _child(*run)  # helion runs here (its interpreter): the cell does
    assert record["ok"] is False and "a skipped %%dsl cell must not run" in record["error"]
    assert "--skip-dsl" in child_command(str(path), "doubled", None, "ncu", skip_dsl=True)
    assert "--skip-dsl" not in child_command(str(path), "doubled", None, "ncu")
