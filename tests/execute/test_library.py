"""labmagic.kernel: a chapter's variant as a callable, replayed in a namespace of its own."""

from __future__ import annotations

import json

import pytest

import labmagic
from labmagic.errors import LabError
from labmagic.execute import library


@pytest.fixture(autouse=True)
def _one_shell(shell):
    """The suite's shell is the process's IPython singleton: start it before any replay would make a plain one."""


def _cell(source: str, tags=()):
    return {"cell_type": "code", "metadata": {"tags": list(tags)}, "source": source, "outputs": [],
            "execution_count": None}


def _chapter(tmp_path, name="98_toy"):
    cells = [
        _cell('size = "full"\nmarker = "chapter"', tags=["parameters"]),
        _cell("%load_ext labmagic\nimport functools\nimport torch\nimport labmagic\nREPLAYS = [1]"),
        _cell("def scaled(x, scale=1.0):\n    return x * scale\n\n"
              "def plain(x):\n    return x + 1\n\n"
              "def make(n):\n    return (torch.randn(n),)\n\n"
              "race_a = labmagic.Race(chapter='98_toy', ref='plain', make_inputs=make,\n"
              "    variants={'plain': plain, 'scaled': functools.partial(scaled, scale=2.0),\n"
              "              'scaled_3': functools.partial(scaled, scale=3.0), 'neg': lambda x: -x})\n"
              "race_b = labmagic.Race(chapter='98_toy', ref='plain', make_inputs=make,\n"
              "    variants={'plain': plain, 'scaled_3': functools.partial(scaled, scale=3.0),\n"
              "              'neg': lambda x: -2 * x})"),
        _cell("%bench race_a"),
        _cell("late = 1"),
        _cell("def tripled(x):\n    return 3 * x\n\n"
              "def pair(x):\n    return x + 2, x\n\n"
              "race_c = labmagic.Race(chapter='98_toy', ref='plain', make_inputs=make,\n"
              "    variants={'plain': plain, 'tripled': tripled, 'pair_first': (lambda fn: lambda x: fn(x)[0])(pair)})"),
        _cell("print(race_c_check_would_fail)", tags=["no-replay"]),
        _cell("%bench race_c"),
        _cell("after_last = 1"),
    ]
    path = tmp_path / f"{name}.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def test_the_chapter_function_a_race_binds_is_returned_in_its_general_form(tmp_path):
    path = _chapter(tmp_path)
    scaled = labmagic.kernel(str(path), "scaled")
    assert scaled.__name__ == "scaled" and float(scaled(torch_ones(), scale=5.0)[0]) == 5.0
    assert labmagic.kernel(str(path), "plain")(torch_ones())[0] == 2.0


def test_the_chapter_function_a_variant_wraps_in_a_closure_is_returned_in_its_general_form(tmp_path):
    """Chapter 08 races its quantisers' codes through `(lambda fn: lambda x: fn(x)[0])(fn)`; chapter 09 needs the
    codes and the scales: the function the closure holds, by its own name."""
    path = _chapter(tmp_path)
    pair = labmagic.kernel(str(path), "pair")
    assert pair.__name__ == "pair" and [float(t[0]) for t in pair(torch_ones())] == [3.0, 1.0]


def test_one_variant_in_several_races_is_one_callable_when_the_partials_agree(tmp_path):
    path = _chapter(tmp_path)
    assert float(labmagic.kernel(str(path), "scaled_3")(torch_ones())[0]) == 3.0


def test_a_name_that_differs_between_races_needs_race(tmp_path):
    path = _chapter(tmp_path)
    with pytest.raises(LabError, match=r"'neg' is a different callable in each of race_a, race_b: name one with race="):
        labmagic.kernel(str(path), "neg")
    assert float(labmagic.kernel(str(path), "neg", race="race_b")(torch_ones())[0]) == -2.0


def test_unknown_names_list_what_exists(tmp_path):
    path = _chapter(tmp_path)
    with pytest.raises(LabError, match=r"98_toy has no variant 'late' \(variants: neg, pair_first, plain, scaled, scaled_3, tripled\)"):
        labmagic.kernel(str(path), "late")  # a plain name, no race's variant
    with pytest.raises(LabError, match=r"has no race 'race_d' \(races: race_a, race_b, race_c\)"):
        labmagic.kernel(str(path), "plain", race="race_d")
    with pytest.raises(LabError, match=r"race 'race_b' has no variant 'scaled'"):
        labmagic.kernel(str(path), "scaled", race="race_b")
    assert library.variants(str(path)) == {"race_a": ["plain", "scaled", "scaled_3", "neg"],
                                          "race_b": ["plain", "scaled_3", "neg"],
                                          "race_c": ["plain", "tripled", "pair_first"]}


def test_a_race_benched_after_the_first_bench_is_replayed_too(tmp_path):
    """Chapter 08's race_w8a8 is defined after its first %bench: the replay runs through the cell that benches the
    last race (no-replay cells and %bench lines left out), and stops there."""
    path = _chapter(tmp_path, "95_toy")
    assert float(labmagic.kernel(str(path), "tripled")(torch_ones())[0]) == 3.0
    ns = library.chapter_namespace(str(path))
    assert ns["late"] == 1 and "after_last" not in ns


def test_the_replay_leaves_the_callers_namespace_alone_and_runs_once(tmp_path, shell):
    path = _chapter(tmp_path, "97_toy")
    shell.run(f'import labmagic\nmarker = "mine"\nsize = 7\nf = labmagic.kernel({str(path)!r}, "plain")')
    assert shell.ns["marker"] == "mine" and shell.ns["size"] == 7 and "race_a" not in shell.ns
    assert shell.run("f(1)") == 2
    ns = library.chapter_namespace(str(path))
    assert ns["marker"] == "chapter" and ns["size"] == "full"
    ns["REPLAYS"].append(2)
    labmagic.kernel(str(path), "plain")
    assert library.chapter_namespace(str(path))["REPLAYS"] == [1, 2]  # served from the cache, not replayed


def test_each_chapter_replays_in_its_own_namespace_which_is_main_meanwhile(tmp_path, shell):
    """Two chapters replayed in one process see none of each other's names, and during each replay
    sys.modules['__main__'] is the chapter's namespace (Helion's generated code imports __main__ for the globals of
    what it compiles: chapter 03 failed to replay without it); the caller's __main__ is back afterwards."""
    import sys

    first, second = _chapter(tmp_path, "93_toy"), _chapter(tmp_path, "94_toy")
    nb = json.loads(second.read_text())
    nb["cells"][1]["source"] += ("\nimport sys\nMAIN_IS_MINE = sys.modules['__main__'].__dict__ is globals()"
                                 "\nSAW_LEAK = 'LEAK' in globals()")
    second.write_text(json.dumps(nb))
    nb = json.loads(first.read_text())
    nb["cells"][1]["source"] += "\nLEAK = 1"
    first.write_text(json.dumps(nb))
    main = sys.modules["__main__"]
    assert library.chapter_namespace(str(first))["LEAK"] == 1
    ns = library.chapter_namespace(str(second))
    assert ns["MAIN_IS_MINE"] is True and ns["SAW_LEAK"] is False
    assert sys.modules["__main__"] is main


def test_a_chapter_cell_that_fails_names_the_cell_and_restores_the_namespace(tmp_path, shell):
    path = _chapter(tmp_path, "96_toy")
    nb = json.loads(path.read_text())
    nb["cells"][2]["source"] = "raise ValueError('broken chapter')"
    path.write_text(json.dumps(nb))
    shell.run("import labmagic\nmarker = 'kept'")
    with pytest.raises(LabError, match=r"96_toy.ipynb: code cell 3 .* ValueError: broken chapter"):
        shell.run(f"labmagic.kernel({str(path)!r}, 'plain')")
    assert shell.ns["marker"] == "kept" and "REPLAYS" not in shell.ns


def torch_ones():
    import torch

    return torch.ones(1)
