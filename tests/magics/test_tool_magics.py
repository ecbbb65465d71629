"""``%ncu`` / ``%sanitize`` behaviour that needs no GPU: registration, the no-GPU path, argument errors."""

from __future__ import annotations

import pytest

from labmagic.child.replay import races_in
from labmagic.errors import LabError
from labmagic.runtime import has_gpu


@pytest.fixture
def no_races(shell, monkeypatch):
    """The session's shell is shared: hide races other tests left in it (restored afterwards)."""
    while races := races_in(shell.ns):  # a race bound to two names shows once per pass
        for name, _ in races:
            monkeypatch.delitem(shell.ns, name)
    return shell


def test_magics_are_registered(shell):
    magics = shell.ip.magics_manager.magics["line"]
    assert "ncu" in magics and "sanitize" in magics


@pytest.mark.skipif(has_gpu(), reason="checks the behaviour on a machine without a GPU")
def test_without_a_gpu_the_cell_does_not_fail(shell, capsys):
    assert shell.run("%ncu cuda_float4 --chapter 01") is None
    assert shell.run("%sanitize cuda_float4") is None
    out = capsys.readouterr().out
    assert "%ncu: needs a CUDA GPU; skipped" in out and "%sanitize: needs a CUDA GPU; skipped" in out


def test_variants_are_checked_against_the_notebook_race(no_races, monkeypatch):
    import torch

    import labmagic.benchmark

    shell = no_races
    monkeypatch.setattr("labmagic.runtime.has_gpu", lambda: True)
    monkeypatch.setitem(shell.ns, "race_for_test", labmagic.benchmark.Race(
        chapter="01_vector_add", variants={"torch": torch.add}, ref="torch", make_inputs=lambda n: (n,)))
    with pytest.raises(LabError, match="no variant cuda_nope in race '01_vector_add'"):
        shell.run("%ncu cuda_nope")
    with pytest.raises(LabError, match="NAME=VALUE"):
        shell.run("%sanitize torch -p size")
    monkeypatch.setitem(shell.ns, "other_race", labmagic.benchmark.Race(
        chapter="02_other", variants={"torch": torch.add}, ref="torch", make_inputs=lambda n: (n,)))
    with pytest.raises(LabError, match=r"several races \(other_race, race_for_test\)"):
        shell.run("%ncu torch")
    monkeypatch.delitem(shell.ns, "race_for_test")


def test_without_a_race_the_chapter_must_be_named(no_races, monkeypatch):
    shell = no_races
    monkeypatch.setattr("labmagic.runtime.has_gpu", lambda: True)
    with pytest.raises(LabError, match="which chapter"):
        shell.run("%ncu torch")


@pytest.mark.parametrize("module_name", ["labmagic.cli.profile", "labmagic.cli.sanitize"])
def test_cli_modules_parse_and_need_a_gpu(module_name, monkeypatch):
    import argparse
    import importlib

    from labmagic.errors import NoGPUError

    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    args = parser.parse_args(["01", "--variant", "cuda_float4", "--shape", "2**20", "-p", "size=quick"])
    assert (args.chapter, args.variant, args.shape, args.param) == ("01", ["cuda_float4"], "2**20", ["size=quick"])
    monkeypatch.setattr("labmagic.runtime.has_gpu", lambda: False)
    with pytest.raises(NoGPUError):
        module.run(args)
