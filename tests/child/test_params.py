"""``-p NAME=VALUE``: the child replays a parameter as the source ``NAME = value``, so a NAME that is not a plain
identifier would run as code. Every way in (the child's command line, the replay, the CLI, the parent's command
builder) refuses it with one line, and nothing runs."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from labmagic.child.protocol import child_command, child_env, list_variants
from labmagic.child.replay import replay_cells
from labmagic.cli.chapter_args import add_chapter_arguments, chapter_variants
from labmagic.errors import LabError


def _exploits(marker):
    """Parameter names that would reach the replay as source: the first two run ``touch marker`` there (the
    issue's own example is a SyntaxError in the replay, but still must be refused before it)."""
    touch = f"__import__('os').system('touch {marker}')"
    return [f"globals()[{touch}]", f"import os; os.system('touch {marker}')\nx", touch]


def _chapter(tmp_path):
    cell = {"cell_type": "code", "metadata": {"tags": ["parameters"]}, "outputs": [], "execution_count": None,
            "source": "import torch\nimport labmagic.benchmark\nsize = 'full'\n"
                      "race = labmagic.benchmark.Race(chapter='99_tiny', variants={'torch': torch.neg}, ref='torch',\n"
                      "    make_inputs=lambda n: (torch.randn(n),), shapes=[(8,)])"}
    path = tmp_path / "99_tiny.ipynb"
    path.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def _child(path, name):
    return subprocess.run([sys.executable, "-m", "labmagic.child", "--chapter", str(path), "--mode", "list",
                           "-p", f"{name}=1"], capture_output=True, text=True, timeout=300, env=child_env())


def test_the_child_refuses_a_parameter_name_that_is_code_and_runs_nothing(tmp_path):
    path = _chapter(tmp_path)
    for name in _exploits(tmp_path / "X"):
        proc = _child(path, name)
        # argparse's usage error, before the chapter is replayed: one line, no traceback, no record
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "is not a parameter name" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "X").exists()


def test_the_childs_usage_error_names_the_parameter(tmp_path):
    err = _child(_chapter(tmp_path), "class").stderr
    assert "'class' is not a parameter name: NAME in -p NAME=VALUE must be a Python identifier" in err


def test_replay_refuses_a_parameter_name_that_is_code(tmp_path):
    nb = json.loads(_chapter(tmp_path).read_text())
    for name in [*_exploits(tmp_path / "X"), "for", "", "size "]:
        with pytest.raises(LabError, match="is not a parameter name"):
            replay_cells(nb, {name: 1})
    cells, _ = replay_cells(nb, {"size": "quick", "größe": 2})  # identifiers still are names
    assert cells[1] == "size = 'quick'\ngröße = 2"


def test_the_parent_never_builds_a_command_with_such_a_name(tmp_path):
    name = _exploits(tmp_path / "X")[0]
    with pytest.raises(LabError, match="is not a parameter name"):
        child_command("01", "torch", None, "run", params={name: 1})
    with pytest.raises(LabError, match="is not a parameter name"):
        list_variants("01", params={name: 1})
    assert child_command("01", "torch", None, "run", params={"size": "quick"})[-2:] == ["-p", "size=quick"]


def _cli(argv):
    parser = argparse.ArgumentParser(prog="labmagic profile")
    add_chapter_arguments(parser, "profile")
    return parser.parse_args(argv)


def test_the_cli_refuses_a_parameter_name_that_is_code(tmp_path, capsys):
    with pytest.raises(SystemExit) as exited:
        _cli(["01", "-p", f"{_exploits(tmp_path / 'X')[0]}=1"])
    assert exited.value.code == 2
    assert "is not a parameter name" in capsys.readouterr().err
    args = argparse.Namespace(chapter="01", variant=["torch"], param=["globals()[0]=1"])  # built without the parser
    with pytest.raises(LabError, match="is not a parameter name"):
        chapter_variants(args)
    assert not (tmp_path / "X").exists()


def test_the_cli_refuses_a_variant_name_that_is_a_path():
    with pytest.raises(LabError, match="'../../x' is not a variant name"):
        chapter_variants(_cli(["01", "--variant", "torch", "--variant", "../../x"]))
    assert chapter_variants(_cli(["01", "--variant", "cuda_float4", "-p", "size=quick"])) == (
        {"size": "quick"}, ["cuda_float4"])


def test_the_cli_lists_the_variants_of_the_race_it_names(tmp_path):
    """``labmagic profile 08 --race race_b``: the variants come from race_b, not from the chapter's first race."""
    path = _chapter(tmp_path)
    nb = json.loads(path.read_text())
    nb["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                        "source": "race_b = labmagic.benchmark.Race(chapter='99_tiny', ref='torch', shapes=[(8,)],\n"
                                  "    variants={'torch': torch.abs, 'torch_sq': torch.square},\n"
                                  "    make_inputs=lambda n: (torch.randn(n),))"})
    path.write_text(json.dumps(nb))
    assert chapter_variants(_cli([str(path), "--race", "race_b"])) == ({}, ["torch", "torch_sq"])
    assert chapter_variants(_cli([str(path), "--race", "race"])) == ({}, ["torch"])
    # race_b benched after race's %bench (chapter 08's race_w8a8): the child replays through race_b's cell
    nb["cells"][1:1] = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                         "source": "%bench race"}]
    nb["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                        "source": "%bench race_b"})
    path.write_text(json.dumps(nb))
    assert chapter_variants(_cli([str(path), "--race", "race_b"])) == ({}, ["torch", "torch_sq"])
    with pytest.raises(LabError, match="is not a Python name"):
        chapter_variants(_cli([str(path), "--race", "race_b; x"]))
